"""``ranked``: the candidates a ranking keeps, best first, equal weights in
the source's order, each re-weighed only when read."""

from scheduler_ext.sources.base import (Candidate, Inserted, MoveCandidates,
                                        RankedCandidates, RankedSource, Weights, ranked)


class _Ranking:
    limit = 10
    orders_all = False

    def __init__(self, weights):
        self.weights = weights

    def rank(self, cands):
        return list(self.weights)


class _Counted(Candidate):
    __slots__ = ()
    built: list = []

    def with_weight(self, weight):
        _Counted.built.append(self.root)
        return Candidate(self.root, self.allocations, weight, self.mappings)


def _cands(n):
    return [_Counted(f"r{i}", {f"r{i}": {"VCPU": 1}}, 0.0) for i in range(n)]


def test_kept_best_first_ties_in_source_order():
    got = ranked(_cands(5), _Ranking([1.0, None, 3.0, 1.0, 2.0]))
    assert [(c.root, c.weight) for c in got] == [
        ("r2", 3.0), ("r4", 2.0), ("r0", 1.0), ("r3", 1.0)]
    assert len(got) == 4
    assert [c.root for c in got[1:3]] == ["r4", "r0"]
    assert got[-1].root == "r3"


def test_only_what_is_read_is_built():
    _Counted.built.clear()
    got = RankedCandidates(_cands(1000), [float(i % 7) for i in range(1000)])
    assert len(got) == 1000
    first = got[0]
    assert first.weight == 6.0 and _Counted.built == [first.root]


def test_an_order_given_with_the_weights_reads_as_the_sort():
    """A ranking that knows its order (``Weights.best_first``) is read as
    the sort of its weights would read."""
    import random
    rng = random.Random(3)
    for n in (0, 1, 7, 50):
        weights = [rng.choice([None, 1.0, 2.0, 5.0]) for _ in range(n)]
        given = Weights(weights, sorted((i for i in range(n) if weights[i] is not None),
                                        key=lambda i: (-weights[i], i)))
        cands = _cands(n)
        fast = RankedCandidates(cands, given)
        assert fast._order is given.best_first     # not sorted again
        assert [fast.weight_at(k) for k in range(len(fast))] == [c.weight for c in fast]
        new = Candidate("new", {}, 2.0)
        for ahead in (False, True):
            assert [c.root for c in Inserted(fast, new, ahead=ahead)] == \
                [c.root for c in Inserted(list(fast), new, ahead=ahead)]
        assert [(c.root, c.weight) for c in fast] == \
            [(c.root, c.weight) for c in RankedCandidates(cands, weights)]


class _Inner:
    """A source answering one move: ``others``, the source root twice."""

    def __init__(self, others, same, held):
        self.view = MoveCandidates(same, others, held)

    def move_candidates(self, query, *, limit, source, released, ordered=True):
        return self.view


class _Ordered(_Ranking):
    """``_Ranking`` that also gives its order (``Weights.best_first``)."""

    def rank(self, cands):
        return Weights(self.weights, sorted(
            (i for i, w in enumerate(self.weights) if w is not None),
            key=lambda i: (-self.weights[i], i)))


def test_a_move_ranked_with_a_given_order_reads_as_sorted():
    """The move's own two candidates (same host, held source) ranked with
    the others are left out of the others' order, with or without it."""
    import random
    rng = random.Random(5)
    for _ in range(30):
        n = rng.randint(0, 9)
        weights = [rng.choice([None, 1.0, 2.0, 3.0]) for _ in range(n + 2)]
        inner = _Inner(_cands(n), Candidate("src", {}, 0.0), Candidate("src", {}, 0.0))
        got = [RankedSource(inner, ranking).move_candidates(
            None, limit=10, source="src", released=None)
            for ranking in (_Ranking(weights), _Ordered(weights))]
        plain, fast = ([(c.root, c.weight) for c in view.others] for view in got)
        assert fast == plain and len(plain) == sum(w is not None for w in weights[:n])
        assert got[0].same_host == got[1].same_host
        assert got[0].held_source == got[1].held_source


def test_dropped_by_every_filter_is_empty():
    assert len(ranked(_cands(3), _Ranking([None, None, None]))) == 0


def test_inserted_is_where_a_stable_sort_puts_it():
    """``Inserted`` equals the full sort it replaces: after equal weights
    (the candidate last in the sorted list), before them when ``ahead``
    (first), at the front when ``front``."""
    import random

    rng = random.Random(7)
    for n in range(0, 12):
        for _ in range(20):
            base = sorted((Candidate(f"r{i}", {}, float(rng.randint(0, 3)))
                           for i in range(n)), key=lambda c: -c.weight)
            new = Candidate("new", {}, float(rng.randint(0, 3)))
            roots = [c.root for c in Inserted(base, new)]
            assert roots == [c.root for c in sorted(base + [new], key=lambda c: -c.weight)]
            roots = [c.root for c in Inserted(base, new, ahead=True)]
            assert roots == [c.root for c in sorted([new] + base, key=lambda c: -c.weight)]
            got = Inserted(base, new, front=True)
            assert [c.root for c in got] == ["new"] + [c.root for c in base]
            assert len(got) == n + 1 and got[-1].root == (base[-1].root if n else "new")
            assert [c.root for c in got[1:3]] == [c.root for c in ([new] + base)[1:3]]


class _ReadWeights(RankedCandidates):
    """Candidates that record which weights are read."""

    def __init__(self, cands, weights):
        super().__init__(cands, weights)
        self.read: list[int] = []

    def weight_at(self, k):
        self.read.append(k)
        return super().weight_at(k)


def test_inserted_reads_no_weight_past_the_candidate_read():
    """Reading ``Inserted``'s first items reads the weights up to them
    only (a ranking may make its far end when read), and its place is
    still the full search's."""
    import random

    rng = random.Random(11)
    for _ in range(200):
        n = rng.randint(1, 300)
        weights = sorted((float(rng.randint(0, 20)) for _ in range(n)), reverse=True)
        new = Candidate("new", {}, float(rng.randint(-1, 21)))
        ahead = rng.random() < 0.5
        want = [c.root for c in Inserted(list(RankedCandidates(_cands(n), weights)), new,
                                         ahead=ahead)]
        base = _ReadWeights(_cands(n), weights)
        got = Inserted(base, new, ahead=ahead)
        upto = rng.randint(0, n)
        assert [got[k].root for k in range(upto + 1)] == want[:upto + 1]
        assert max(base.read, default=0) <= upto
        assert [c.root for c in got] == want
