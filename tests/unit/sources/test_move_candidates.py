"""A move's candidates with one fit of the released view plus the roots
that draw on a released provider solved again on the held view: the other
hosts against a whole fit of the held view; the source host (``same_host``
on the released view, ``held_source`` on the held one) against
``lab.reference``, placement's rules in plain Python: there exactly when
the source has a candidate in that view, one of the source's candidates
there, and keeping as much of the server's old allocations in place as any
of them. On seeded random flat, sharing and nested fleets and on the
benchmark fleet."""

import random

import numpy as np
import pytest

from scheduler_ext.engine import CapacityIndex, Weigher
from scheduler_ext.engine.weigh import Weighing, top_k
from scheduler_ext.lab import nested, reference, synthetic
from scheduler_ext.lab.bench_engine import flavor_requests
from scheduler_ext.lab.nested_requests import random_nested_requests
from scheduler_ext.placement import DEVICE_CLASSES
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.sources import engine as engine_source
from scheduler_ext.sources.picked import picked_candidates


def _source(index, weigher=None):
    """An EngineCandidateSource over ``index`` (no placement behind it)."""
    return engine_source.EngineCandidateSource(
        index, Weighing(weigher or Weigher.nova(1.0, 0.5, 0.25), 1))


def held_fit_others(src, query, limit, source, released) -> list:
    """The other hosts from one whole fit of the held view, weighed
    against the released view, best ``limit`` first."""
    index = src.index
    fit_r = index.fit(query, released) if released else None
    fit_h = index.fit(query)
    weigh_fit = fit_r if fit_r is not None else fit_h
    weights = src.weigher.weigh(weigh_fit.free, len(weigh_fit))
    w_h = weights if weigh_fit is fit_h else \
        weights[np.searchsorted(weigh_fit.rows, fit_h.rows)]
    src_row = index.row_of.get(source, -1)
    idx = np.flatnonzero(fit_h.rows != src_row)
    order = top_k(w_h[idx], index.key_hi[fit_h.rows[idx]],
                  index.key_lo[fit_h.rows[idx]], limit)
    positions = idx[order]
    return list(picked_candidates(fit_h, positions, w_h[positions].tolist()))


def _as_reference(cand):
    """A Candidate as ``Reference.by_anchor`` gives one."""
    return (frozenset(((rp, rc), n) for rp, res in cand.allocations.items()
                      for rc, n in res.items()),
            frozenset((s, frozenset(m)) for s, m in cand.mappings.items()))


def _kept(totals, old) -> int:
    """Units of ``old`` a candidate keeps on the provider holding them (a
    device class is never kept: the new flavor's devices are new ones)."""
    return sum(min(n, old.get(rp, {}).get(rc, 0)) for (rp, rc), n in totals
               if rc not in DEVICE_CLASSES)


def _keeps_unnumbered(ref, query, source, totals, old) -> bool:
    """The candidate draws each class of the unnumbered group that ``old``
    holds for the source from its largest holder there (the source's tree,
    or a sharing provider in one of its aggregates): a same-host move
    leaves the disk on its pool (``engine.pinned``); a device class (vGPU)
    goes beside the old one, wherever the reference finds room."""
    def serves(rp):
        p = ref.by_uuid.get(rp)
        return p is not None and (p.root == source or (
            reference.SHARING in p.traits
            and bool(p.aggregates & ref.by_uuid[source].aggregates)))
    drawn = {(rp, rc) for (rp, rc), _ in totals}
    for rc in set(query.resources) - DEVICE_CLASSES:
        holders = sorted((-res[rc], rp) for rp, res in old.items()
                         if res.get(rc) and serves(rp))
        if holders and (holders[0][1], rc) not in drawn:
            return False
    return True


def _check_source(ref, query, source, cand, old, view, what):
    """``cand``, the source host's candidate on ``view`` (released amounts,
    or None for the held view), against the reference's candidates there:
    one of them, keeping the old unnumbered classes where they are and as
    many old units in place as any of those; None only when none of them
    keeps the old unnumbered classes."""
    # the source's candidates need its tree and the sharing providers only
    ref = reference.Reference(p for p in ref.providers if p.root == source
                              or reference.SHARING in p.traits)
    there = [c for c in ref.by_anchor(query, view).get(source, [])
             if not old or _keeps_unnumbered(ref, query, source, c[0], old)]
    if reference.SHARING in ref.by_uuid[source].traits:
        there = []      # a sharing provider is no host
    assert (cand is None) == (not there), (what, query.to_query(), source)
    if cand is None:
        return
    mine = _as_reference(cand)
    assert mine in there, (what, query.to_query(), source, mine)
    if old:
        assert _kept(mine[0], old) == max(_kept(t, old) for t, _ in there), \
            (what, "keeps less of the old allocations in place", query.to_query())


def _roots_of(allocs, index):
    """The non-sharing roots ``allocs`` sits on (the source host)."""
    out = set()
    for rp in allocs:
        row = index.row_of.get(rp)
        if row is None or row in index.sharing_set:
            continue
        out.add(index.tree.get(row, (None, rp))[1])
    return out


def _check(src, ref, query, released, limit):
    for source in sorted(_roots_of(released or {}, src.index)) or [
            src.index.uuids[0]]:
        got = src.move_candidates(query, limit=limit, source=source,
                                  released=released)
        assert list(got.others) == held_fit_others(src, query, limit, source, released), \
            (query.to_query(), source, released)
        _check_source(ref, query, source, got.same_host, released, released,
                      "same_host")
        if got.same_host is None:
            assert got.held_source is None
        else:
            _check_source(ref, query, source, got.held_source, released, None,
                          "held_source")


@pytest.mark.parametrize("seed", range(30))
def test_same_as_two_fits_on_random_flat_fleets(seed):
    spec = synthetic.random_fleet(seed, size=(10, 60))
    p = EmbeddedPlacement()
    synthetic.load(p, spec)
    snap = p.snapshot()
    src = _source(CapacityIndex.from_snapshot(snap))
    ref = reference.Reference(reference.from_snapshot(snap))
    movers = [spec.consumers[spec.mover]] if spec.mover else []
    for allocs in movers + [None] + list(spec.consumers.values())[:3]:
        for query in synthetic.random_requests(spec, random.Random(seed), 6):
            _check(src, ref, query, allocs, limit=random.Random(seed).choice([1, 3, 50]))


@pytest.mark.parametrize("seed", range(30))
def test_same_as_two_fits_on_random_nested_fleets(seed):
    spec = nested.random_nested_fleet(seed, sharing_in_trees=seed % 4 == 0)
    p = EmbeddedPlacement()
    synthetic.load(p, spec)
    snap = p.snapshot()
    src = _source(CapacityIndex.from_snapshot(snap))
    ref = reference.Reference(reference.from_snapshot(snap))
    movers = [spec.consumers[spec.mover]] if spec.mover else []
    for allocs in movers + list(spec.consumers.values())[:3]:
        for query in random_nested_requests(spec, random.Random(seed), 6):
            _check(src, ref, query, allocs, limit=20)


@pytest.mark.parametrize("local_disk", [True, False])
def test_same_as_two_fits_on_the_benchmark_fleet(local_disk):
    """Hosts with their own disk, and hosts on an aggregate's shared pool
    (every host of that aggregate drawing on the released pool is solved
    again): the released amounts are taken from what each host uses."""
    fleet = synthetic.bench_fleet(3000, seed=3)
    index = CapacityIndex.from_columnar(fleet)
    src = _source(index)
    ref = reference.Reference(reference.from_columnar(fleet))
    disk, vcpu = index.columns["DISK_GB"], index.columns["VCPU"]
    rng = np.random.default_rng(0)
    hosts = [r for r in rng.permutation(index.n_rows).tolist() if vcpu.holds(r)
             and disk.holds(r) == local_disk and r not in index.sharing_set][:6]
    assert hosts
    for row in hosts:
        host = index.uuids[row]
        released = {host: {"VCPU": 2, "MEMORY_MB": 4096}}
        if local_disk:
            released[host]["DISK_GB"] = 40
        else:
            pools = [s for s in index.sharing_set if index.aggregates.row_uuids(s)
                     & index.aggregates.row_uuids(row)]
            assert pools
            released[index.uuids[pools[0]]] = {"DISK_GB": 40}
        for query in flavor_requests(limit=1000):
            _check(src, ref, query, released, limit=1000)
