"""Capacity arithmetic of the engine, exactly as placement's read path."""

import uuid

import numpy as np
import pytest

from scheduler_ext.engine import CapacityIndex
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement


def fleet(*providers, **index_kwargs):
    """providers: (name, {rc: Inventory}, {rc: used}); returns (index,
    {name: uuid}, placement)."""
    p = EmbeddedPlacement()
    p.create_resource_class("CUSTOM_X")
    names = {}
    for name, invs, used in providers:
        rp = p.create_provider(name)
        names[name] = rp.uuid
        p.set_inventories(rp.uuid, 0, invs)
        used = {rc: n for rc, n in used.items() if n}
        if used:
            p.put_allocations(str(uuid.uuid4()), AllocationWrite(
                {rp.uuid: used}, "p", "u", None))
    return CapacityIndex.from_snapshot(p.snapshot(), **index_kwargs), names, p


def fits(index, **resources):
    return sorted(index.fit(CandidateRequest(resources)).uuids())


def test_capacity_rounds_down_in_float64():
    # (100 - 0) * 0.57 = 56.99999999999999: 56 fits, 57 does not
    index, n, _ = fleet(("cn", {"VCPU": Inventory(100, allocation_ratio=0.57)}, {}))
    assert fits(index, VCPU=56) == [n["cn"]]
    assert fits(index, VCPU=57) == []
    summary = index.candidates(CandidateRequest({"VCPU": 56}))["provider_summaries"]
    assert summary[n["cn"]]["resources"]["VCPU"] == {"capacity": 56, "used": 0}


def test_used_plus_amount_against_capacity_with_reserved():
    # (10 - 4) * 1.5 = 9, 5 used: 4 fits, 5 does not
    index, n, _ = fleet(("cn", {"VCPU": Inventory(10, reserved=4, allocation_ratio=1.5)},
                         {"VCPU": 5}))
    assert fits(index, VCPU=4) == [n["cn"]]
    assert fits(index, VCPU=5) == []


@pytest.mark.parametrize("amount,ok", [
    (64, False),   # below min_unit
    (128, True),
    (200, False),  # not a multiple of step_size
    (768, True),
    (800, False),  # max_unit but not a step multiple
    (832, False),  # above max_unit
])
def test_min_max_step(amount, ok):
    inv = Inventory(4096, min_unit=128, max_unit=800, step_size=64)
    index, n, _ = fleet(("cn", {"MEMORY_MB": inv}, {}))
    assert fits(index, MEMORY_MB=amount) == ([n["cn"]] if ok else [])


def test_reserved_equal_to_total_is_zero_capacity():
    index, n, _ = fleet(("cn", {"VCPU": Inventory(4, reserved=4)}, {}),
                        ("ok", {"VCPU": Inventory(4)}, {}))
    assert fits(index, VCPU=1) == [n["ok"]]


def test_over_capacity_provider_fits_nothing():
    index, n, p = fleet(("cn", {"VCPU": Inventory(8)}, {"VCPU": 8}))
    gen, _ = p.get_inventories(n["cn"])
    p.set_inventories(n["cn"], gen, {"VCPU": Inventory(4)})  # below usage
    index.refresh_provider(next(r for r in p.snapshot().providers
                                if r.provider.uuid == n["cn"]))
    assert fits(index, VCPU=1) == []
    answer = index.candidates(CandidateRequest({"VCPU": 1}))
    assert answer == {"allocation_requests": [], "provider_summaries": {}}


def test_single_precision_ratio_mirrors_mysql_float():
    # MariaDB's FLOAT holds 0.7 as 0.699999988: the SQL filter sees 6.99999988
    inv = {"VCPU": Inventory(10, allocation_ratio=0.7)}
    double, n, _ = fleet(("cn", inv, {}))
    single, _, _ = fleet(("cn", inv, {}), single_precision_ratio=True)
    assert fits(double, VCPU=7) == [n["cn"]]
    assert fits(single, VCPU=7) == []
    assert fits(single, VCPU=6) != []
    # the summary is computed in Python from the double: still 7
    rp = single.fit(CandidateRequest({"VCPU": 6}))
    assert list(rp.provider_summaries([0]).values())[0]["resources"]["VCPU"] == \
        {"capacity": 7, "used": 0}


def test_amount_beyond_int32_fits_nothing():
    index, _, _ = fleet(("cn", {"VCPU": Inventory(8)}, {}))
    assert fits(index, VCPU=2**40) == []


def test_class_absent_from_provider_never_fits():
    index, n, _ = fleet(("cn", {"VCPU": Inventory(8)}, {}),
                        ("gpu", {"VGPU": Inventory(2)}, {}))
    assert fits(index, VGPU=1) == [n["gpu"]]
    assert fits(index, VCPU=1, VGPU=1) == []
    assert fits(index, DISK_GB=1) == []  # a class no provider has


@pytest.mark.parametrize("dense_threshold", [0.0, 0.25, 1.01])
def test_dense_and_sparse_columns_agree(dense_threshold):
    rows = [(f"cn{i}", {"VCPU": Inventory(8, step_size=2 if i % 3 else 1),
                        **({"CUSTOM_X": Inventory(3, max_unit=2)} if i % 4 == 0 else {})},
             {"VCPU": i % 9 // 2 * 2}) for i in range(12)]
    index, n, _ = fleet(*rows, dense_threshold=dense_threshold)
    for vcpu in range(1, 10):
        for x in (None, 1, 2, 3):
            res = {"VCPU": vcpu, **({"CUSTOM_X": x} if x else {})}
            expect = sorted(
                n[name] for name, invs, used in rows
                if vcpu <= 8 - used["VCPU"] and vcpu % invs["VCPU"].step_size == 0
                and (not x or ("CUSTOM_X" in invs and x <= 2)))
            assert fits(index, **res) == expect, (res, dense_threshold)


def test_memory_per_provider_per_class_within_target():
    index, _, _ = fleet(*[(f"cn{i}", {"VCPU": Inventory(8), "MEMORY_MB": Inventory(1024),
                                      "DISK_GB": Inventory(10)}, {}) for i in range(50)])
    mem = index.memory()
    assert mem["bytes_per_provider_per_class"] <= 64
    assert np.isfinite(mem["total"])
