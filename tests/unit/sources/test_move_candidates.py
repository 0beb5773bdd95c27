"""A move's candidates with one fit of the released view plus the roots
that draw on a released provider solved again on the held view, against
two whole fits (the released view and the held one), on seeded random
flat, sharing and nested fleets and on the benchmark fleet."""

import random

import numpy as np
import pytest

from scheduler_ext.engine import CapacityIndex, Weigher
from scheduler_ext.engine.pinned import whole_devices
from scheduler_ext.engine.weigh import top_k
from scheduler_ext.lab import nested, synthetic
from scheduler_ext.lab.bench_engine import flavor_requests
from scheduler_ext.lab.nested_requests import random_nested_requests
from scheduler_ext.placement import EmbeddedPlacement
from scheduler_ext.sources import engine as engine_source
from scheduler_ext.sources.picked import picked_candidates
from scheduler_ext.sources.base import MoveCandidates


def _source(index, weigher=None):
    """An EngineCandidateSource over ``index`` (no placement behind it)."""
    src = engine_source.EngineCandidateSource.__new__(
        engine_source.EngineCandidateSource)
    src.index = index
    src.weigher = weigher or Weigher.nova(1.0, 0.5, 0.25)
    src.host_subset_size = 1
    return src


def two_fits(src, query, limit, source, released) -> MoveCandidates:
    """Every root solved on both views: the released one for the weights
    and the same-host candidate, the held one for the rest."""
    index = src.index
    fit_r = index.fit(query, released) if released else None
    fit_h = index.fit(query)
    weigh_fit = fit_r if fit_r is not None else fit_h
    weights = src.weigher.weigh(weigh_fit.free, len(weigh_fit))
    w_h = weights if weigh_fit is fit_h else \
        weights[np.searchsorted(weigh_fit.rows, fit_h.rows)]
    src_row = index.row_of.get(source, -1)
    same = held_source = None
    i = engine_source._position(weigh_fit.rows, src_row)
    if i is not None:
        same = src._on_source(weigh_fit, i, weights[i], released, released)
    j = engine_source._position(fit_h.rows, src_row)
    if j is not None:
        held_source = src._on_source(fit_h, j, w_h[j], released, None)
    idx = np.flatnonzero(fit_h.rows != src_row)
    order = top_k(w_h[idx], index.key_hi[fit_h.rows[idx]],
                  index.key_lo[fit_h.rows[idx]], limit)
    positions = idx[order]
    devices = whole_devices(index, released, same.allocations if same else None)
    return MoveCandidates(same, picked_candidates(
        fit_h, positions, w_h[positions].tolist()), held_source, bool(devices))


def _roots_of(allocs, index):
    """The non-sharing roots ``allocs`` sits on (the source host)."""
    out = set()
    for rp in allocs:
        row = index.row_of.get(rp)
        if row is None or row in index.sharing_set:
            continue
        out.add(index.tree.get(row, (None, rp))[1])
    return out


def _check(src, query, released, limit):
    for source in sorted(_roots_of(released or {}, src.index)) or [
            src.index.uuids[0]]:
        got = src.move_candidates(query, limit=limit, source=source,
                                  released=released)
        want = two_fits(src, query, limit, source, released)
        assert got == want, (query.to_query(), source, released)


@pytest.mark.parametrize("seed", range(30))
def test_same_as_two_fits_on_random_flat_fleets(seed):
    spec = synthetic.random_fleet(seed, size=(10, 60))
    p = EmbeddedPlacement()
    synthetic.load(p, spec)
    src = _source(CapacityIndex.from_snapshot(p.snapshot()))
    movers = [spec.consumers[spec.mover]] if spec.mover else []
    for allocs in movers + [None] + list(spec.consumers.values())[:3]:
        for query in synthetic.random_requests(spec, random.Random(seed), 6):
            _check(src, query, allocs, limit=random.Random(seed).choice([1, 3, 50]))


@pytest.mark.parametrize("seed", range(30))
def test_same_as_two_fits_on_random_nested_fleets(seed):
    spec = nested.random_nested_fleet(seed, sharing_in_trees=seed % 4 == 0)
    p = EmbeddedPlacement()
    synthetic.load(p, spec)
    src = _source(CapacityIndex.from_snapshot(p.snapshot()))
    movers = [spec.consumers[spec.mover]] if spec.mover else []
    for allocs in movers + list(spec.consumers.values())[:3]:
        for query in random_nested_requests(spec, random.Random(seed), 6):
            _check(src, query, allocs, limit=20)


@pytest.mark.parametrize("local_disk", [True, False])
def test_same_as_two_fits_on_the_benchmark_fleet(local_disk):
    """Hosts with their own disk, and hosts on an aggregate's shared pool
    (every host of that aggregate drawing on the released pool is solved
    again): the released amounts are taken from what each host uses."""
    fleet = synthetic.bench_fleet(3000, seed=3)
    index = CapacityIndex.from_columnar(fleet)
    src = _source(index)
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
            _check(src, query, released, limit=1000)
