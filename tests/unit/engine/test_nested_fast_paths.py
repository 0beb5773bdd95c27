"""The shortcuts of the nested select path give what the plain reads give:
the branch-free selections equal numpy's own, a slot known from the
holder cache reads the same free units as a lookup by row, and a fit
read after the trees changed falls back to the lookup."""

import dataclasses
import uuid

import numpy as np
import pytest

from scheduler_ext.engine import CapacityIndex, Weigher
from scheduler_ext.engine.tree.branchless import choose, compact, keep
from scheduler_ext.engine.fleet.columns import as_slice
from scheduler_ext.lab.bench_engine import port_requests
from scheduler_ext.lab.nested_bench import nested_bench_fleet
from scheduler_ext.placement.model import Inventory, Provider, ProviderRecord


@pytest.mark.parametrize("seed", range(5))
def test_branchless_selections_equal_numpys(seed):
    rng = np.random.default_rng(seed)
    ok = rng.random(1000) < rng.random()
    a = rng.integers(-1, 10**6, 1000)
    b = rng.integers(-1, 10**6, 1000)
    assert (keep(a, ok) == np.where(ok, a, -1)).all()
    assert (choose(ok, a, b) == np.where(ok, a, b)).all()
    got = compact(ok, a, b)
    assert (got[0] == a[ok]).all() and (got[1] == b[ok]).all()


@pytest.mark.parametrize("index, want", [
    ([3, 5, 7, 9], slice(3, 10, 2)),
    ([0, 1, 2], slice(0, 3, 1)),
    ([1, 2, 4], None),
    ([4, 4], None),
    ([6], None),
])
def test_as_slice_only_for_progressions(index, want):
    arr = np.array(index, np.int64)
    got = as_slice(arr)
    if want is None:
        assert got is arr
    else:
        assert got == want
        assert (np.arange(20)[got] == arr).all()


def _index():
    fleet = nested_bench_fleet(300, seed=3)
    index = CapacityIndex.from_columnar(fleet)
    index.trees()
    return index


def _generic_free(fit, rc):
    rows = fit.supplier(rc)
    return fit.index.columns[rc].gather("free", rows, present=rows is not fit.rows)


@pytest.mark.parametrize("vgpu", [False, True])
def test_known_holder_slots_read_the_same_free_units(vgpu):
    index = _index()
    for request in port_requests(vgpu=vgpu):
        fit = index.fit(request)
        assert len(fit) > 0
        # compute nodes hold VCPU and MEMORY_MB alone: the shortcut applies
        assert {"VCPU", "MEMORY_MB"} <= set(fit.supplier_free)
        for rc in ("VCPU", "MEMORY_MB", "DISK_GB", "VGPU"):
            assert (fit.free(rc) == _generic_free(fit, rc)).all(), rc


def test_a_fit_read_after_the_trees_changed_falls_back_to_rows():
    index = _index()
    request = port_requests()[0]
    fit = index.fit(request)
    before = {rc: fit.free(rc).copy() for rc in ("VCPU", "MEMORY_MB")}
    # a new compute node: every compact root position after it moves
    u = str(uuid.UUID(int=42))
    index.refresh_provider(ProviderRecord(
        Provider(u, "new", 1, u), {"VCPU": Inventory(64), "MEMORY_MB": Inventory(4096)},
        {}, frozenset(), frozenset()))
    for rc, quick in fit.supplier_free.items():
        assert quick() is None, rc
    for rc, values in before.items():
        assert (fit.free(rc) == values).all()
    plain = dataclasses.replace(fit, supplier_free={})
    assert fit.best(5, weigher=Weigher()) == plain.best(5, weigher=Weigher())


def test_select_weighs_as_without_the_shortcut():
    index = _index()
    for request in port_requests() + port_requests(vgpu=True):
        fit = index.fit(request)
        plain = dataclasses.replace(fit, supplier_free={})
        assert fit.best(10, weigher=Weigher()) == plain.best(10, weigher=Weigher())
