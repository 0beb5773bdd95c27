"""Engine candidates whose picks are built when first read
(``sources.picked``) read as the picks built in one batch, whenever and
in whatever order they are read."""

from scheduler_ext.engine import CapacityIndex, Weigher
from scheduler_ext.lab.bench_engine import flavor_requests
from scheduler_ext.lab.synthetic import bench_fleet
from scheduler_ext.sources.base import Candidate, Inserted, RankedCandidates
from scheduler_ext.sources.picked import LazyPicks, PickedBatch, picked_candidates


def _fit(n=400):
    index = CapacityIndex.from_columnar(bench_fleet(n, 3, sharing_fraction=0.05))
    fit = index.fit(flavor_requests()[1])
    positions, weights = fit.best_positions(60, weigher=Weigher())
    return index, fit, positions, weights


def test_reads_as_the_batch_in_any_order_and_after_the_index_changes():
    index, fit, positions, weights = _fit()
    expected = fit.picks(positions)
    roots = [index.uuids[r] for r in fit.rows[positions].tolist()]
    cands = picked_candidates(fit, positions, weights)
    assert [c.root for c in cands] == roots
    assert [c.weight for c in cands] == [float(w) for w in weights]
    # the index moves on: a claim fills the first host
    first = cands[0].root
    index.apply({first: {"VCPU": 1}})
    # a few read one by one, out of order, then the rest in one batch
    order = [7, 3, 0, 59, 12] + [k for k in range(60) if k not in (7, 3, 0, 59, 12)]
    for k in order:
        assert cands[k].allocations == expected[k][0], k
        assert cands[k].mappings == expected[k][1], k
    sharing = {index.uuids[r] for r in index.sharing_set}
    assert any(set(c.allocations) & sharing for c in cands), \
        "the fleet should put some disk on a sharing provider"


def test_nothing_is_built_until_read_and_a_reweigh_shares_the_build():
    _, fit, positions, weights = _fit()
    cands = picked_candidates(fit, positions, weights)
    picks = cands[0]._picks
    assert isinstance(picks, LazyPicks) and picks.built == {}
    heavier = cands[5].with_weight(99.0)
    assert picks.built == {}
    assert heavier.weight == 99.0 and heavier.root == cands[5].root
    assert heavier.allocations == fit.picks([positions[5]])[0][0]
    # with it, the ones that follow it in the batch, in the same call
    assert set(picks.built) == set(range(5, 5 + LazyPicks.SINGLE))
    assert cands[5].allocations is heavier.allocations


class _CountedFit:
    """A fit whose ``picks`` calls are recorded."""

    def __init__(self, fit):
        self.fit, self.calls = fit, []
        self.rows, self.index = fit.rows, fit.index

    def picks(self, positions):
        self.calls.append(list(positions))
        return self.fit.picks(positions)


def test_a_ranked_read_builds_the_ones_ranked_next_in_one_call():
    """Read through ``RankedCandidates``, the first read builds the picks of
    the candidates ranked next (not those next in the batch) in one call;
    reading them after costs no call."""
    _, fit, positions, weights = _fit()
    counted = _CountedFit(fit)
    cands = picked_candidates(counted, positions, weights)
    ranks = [float((k * 7) % 60) if k % 5 else None for k in range(60)]
    ranked = RankedCandidates(cands, ranks)
    order = sorted((k for k in range(60) if ranks[k] is not None),
                   key=lambda k: -ranks[k])
    expected = fit.picks(positions)
    for j in range(3):
        assert ranked[j].root == cands[order[j]].root
        assert ranked[j].allocations == expected[order[j]][0]
    assert counted.calls == [[positions[k] for k in order[:LazyPicks.SINGLE]]]


def test_placing_a_candidate_among_them_first_builds_nothing_extra():
    """``Inserted`` reads weights here and there (a binary search) before
    the best are read: those reads build nothing, and the first pick read
    is built with the ones ranked after it, as without the search."""
    _, fit, positions, weights = _fit()
    counted = _CountedFit(fit)
    cands = picked_candidates(counted, positions, weights)
    ranked = RankedCandidates(cands, [float(60 - k) for k in range(60)])
    source_host = Candidate("source", {"source": {"VCPU": 1}}, 30.5)
    both = Inserted(ranked, source_host)
    assert counted.calls == []
    got = [c.root for c in both[:4]]
    assert got == [cands[k].root for k in range(4)]
    assert [c.allocations for c in both[:4]] == [p[0] for p in fit.picks(positions[:4])]
    assert both[30] is source_host
    assert counted.calls == [positions[:LazyPicks.SINGLE]]


def test_past_the_first_few_the_rest_is_built_at_once():
    _, fit, positions, weights = _fit()
    cands = picked_candidates(fit, positions, weights)
    picks = cands[0]._picks
    for k in range(LazyPicks.SINGLE):
        cands[k].allocations
    assert len(picks.built) == LazyPicks.SINGLE
    cands[LazyPicks.SINGLE].mappings
    assert len(picks.built) == len(positions)


def test_a_batch_lists_roots_and_weights_and_joins_in_any_order():
    """``PickedBatch``: roots (from the index rows) and weights without
    making candidates; two batches joined in a given order read as their
    candidates in it."""
    index, fit, positions, weights = _fit()
    a = picked_candidates(fit, positions[:30], weights[:30])
    b = picked_candidates(fit, positions[30:], weights[30:])
    assert a.roots == [index.uuids[r] for r in fit.rows[positions[:30]].tolist()]
    assert [a.weight_at(k) for k in range(len(a))] == [float(w) for w in weights[:30]]
    order = list(range(59, -1, -2)) + list(range(0, 60, 2))
    joined = PickedBatch.joined([a, b], order)
    whole = list(a) + list(b)
    assert list(joined) == [whole[i] for i in order]
    assert joined.roots == [whole[i].root for i in order]
    assert joined[2:5] == [whole[i] for i in order[2:5]]
    assert joined[-1] == whole[order[-1]]
    assert joined == PickedBatch.joined([a, b], order) and joined != a
