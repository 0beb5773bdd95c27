"""``scheduler-ext bench``'s "same top-k" check: the plain-Python reference
(``lab.reference``) ranks the fitting hosts exactly as the engine does, on
fleets whose hosts have both local disk and a shared disk pool (issue 35:
the reference weighed the pool where the engine, like nova's DiskWeigher,
weighs the host's own disk, and the column read False at every size)."""

import argparse

import pytest

from scheduler_ext.engine import CapacityIndex, Weigher
from scheduler_ext.lab import bench_engine, reference, synthetic


def bench_check(fleet, k):
    """bench's own comparison (``bench_baseline``) over the best ``k``."""
    index = CapacityIndex.from_columnar(fleet)
    args = argparse.Namespace(k=k, baseline_requests=len(bench_engine.FLAVORS))
    return bench_engine.bench_baseline(fleet, index, args)["same_top_k"]


def test_bench_fleet_puts_placements_first_candidate_on_the_pool_for_hosts_with_local_disk():
    """The fleets below exercise the case: hosts whose own disk fits the
    request, yet placement's first candidate (by uuid) takes the disk from
    the shared pool."""
    ref = reference.Reference(reference.from_columnar(synthetic.bench_fleet(1000, 0)))
    request = bench_engine.flavor_requests()[0]
    pool_first = []
    for root, cands in ref.by_anchor(request).items():
        first = dict((rc, u) for (u, rc), _ in cands[0][0])
        claimed = dict((rc, u) for (u, rc), _ in ref.claimed(root, cands)[0])
        if first["DISK_GB"] != root and claimed["DISK_GB"] == root:
            pool_first.append(root)
    assert len(pool_first) > 50


@pytest.mark.parametrize("seed", range(3))
def test_bench_same_top_k_over_every_fitting_host(seed):
    fleet = synthetic.bench_fleet(1000, seed)
    assert bench_check(fleet, k=len(fleet))


@pytest.mark.parametrize("seed", range(3))
def test_bench_same_top_k_with_several_pools_per_aggregate(seed):
    # 25 pools over 10 aggregates: the engine takes the pool with the most
    # free disk for hosts whose own disk is too small or absent
    fleet = synthetic.bench_fleet(500, seed, sharing_fraction=0.05, hosts_per_aggregate=50)
    assert bench_check(fleet, k=len(fleet))


@pytest.mark.parametrize("k", [1, 3, 20])
def test_bench_same_top_k_at_bench_k(k):
    assert bench_check(synthetic.bench_fleet(2000, 7), k=k)


def test_reference_ranks_a_host_by_its_own_disk_not_the_pool():
    """A host with local disk ranks by its own free disk, as the engine
    ranks it."""
    fleet = synthetic.bench_fleet(1000, 0)
    ref = reference.Reference(reference.from_columnar(fleet))
    request = bench_engine.flavor_requests()[0]
    top = ref.select(request, {"DISK_GB": 1.0}, k=len(fleet))
    engine = CapacityIndex.from_columnar(fleet).select(
        request, weigher=Weigher({"DISK_GB": 1.0}), k=len(fleet))
    assert [u for u, _ in top] == [c.root for c in engine]
    assert len(top) > 900
