"""Keeping the index fresh (apply, refresh by generation, append, remove,
sync) and ``released`` usage, all without rebuilding."""

import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.engine import CapacityIndex
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement

AGG = "8592a199-7d73-4465-8df6-ab00a6243c82"
SHARES = "MISC_SHARES_VIA_AGGREGATE"


def record(p, rp_uuid):
    return next(r for r in p.snapshot().providers if r.provider.uuid == rp_uuid)


def claim(p, rp_allocs, consumer=None):
    consumer = consumer or str(uuid.uuid4())
    p.put_allocations(consumer, AllocationWrite(rp_allocs, "p", "u", None))
    return consumer


@pytest.fixture
def two_hosts():
    """cn1 and cn2: VCPU 4, MEMORY_MB 1024, both in AGG; pool: a sharing
    DISK_GB 100 in AGG."""
    p = EmbeddedPlacement()
    names = {}
    for name in ("cn1", "cn2"):
        rp = p.create_provider(name)
        g = p.set_inventories(rp.uuid, 0, {"VCPU": Inventory(4),
                                           "MEMORY_MB": Inventory(1024)})
        p.set_aggregates(rp.uuid, g, [AGG])
        names[name] = rp.uuid
    pool = p.create_provider("pool")
    g = p.set_inventories(pool.uuid, 0, {"DISK_GB": Inventory(100)})
    g = p.set_aggregates(pool.uuid, g, [AGG])
    p.set_traits(pool.uuid, g, [SHARES])
    names["pool"] = pool.uuid
    return p, names, CapacityIndex.from_snapshot(p.snapshot())


def roots(index, released=None, **resources):
    return sorted(index.fit(CandidateRequest(resources), released).uuids())


def test_apply_claim_and_release(two_hosts):
    p, n, index = two_hosts
    assert roots(index, VCPU=3) == sorted([n["cn1"], n["cn2"]])
    before = index.columns["VCPU"].free
    assert index.apply({n["cn1"]: {"VCPU": 2}}) == []
    assert index.columns["VCPU"].free is before  # in place, no rebuild
    assert roots(index, VCPU=3) == [n["cn2"]]
    assert index.usage(n["cn1"]) == {"VCPU": 2, "MEMORY_MB": 0}
    index.apply({n["cn1"]: {"VCPU": 2}}, sign=-1)
    assert roots(index, VCPU=3) == sorted([n["cn1"], n["cn2"]])


def test_apply_accepts_placement_bodies_and_reports_unknown(two_hosts):
    p, n, index = two_hosts
    unknown = str(uuid.uuid4())
    missing = index.apply([{"allocations": {n["cn2"]: {"resources": {"VCPU": 4}}}},
                           {unknown: {"VCPU": 1}, n["cn1"]: {"DISK_GB": 1}}])
    assert missing == [(unknown, "VCPU"), (n["cn1"], "DISK_GB")]
    assert roots(index, VCPU=1) == [n["cn1"]]
    with pytest.raises(errors.InvalidRequest):
        index.apply({n["cn1"]: {"VCPU": 0}})
    with pytest.raises(errors.InvalidRequest):
        index.apply({n["cn1"]: {"VCPU": 1}}, sign=2)


def test_refresh_by_generation(two_hosts):
    p, n, index = two_hosts
    rec = record(p, n["cn1"])
    assert index.refresh_provider(rec) is False  # same generation: skipped
    claim(p, {n["cn1"]: {"VCPU": 4}})
    assert roots(index, VCPU=1) == sorted([n["cn1"], n["cn2"]])  # stale
    free = index.columns["VCPU"].free
    assert index.refresh_provider(record(p, n["cn1"])) is True
    assert index.columns["VCPU"].free is free
    assert roots(index, VCPU=1) == [n["cn2"]]
    assert index.generation(n["cn1"]) == record(p, n["cn1"]).provider.generation


def test_refresh_changes_inventory_traits_and_aggregates(two_hosts):
    p, n, index = two_hosts
    gen, _ = p.get_inventories(n["cn2"])
    gen = p.set_inventories(n["cn2"], gen, {"VCPU": Inventory(16)})  # drops MEMORY_MB
    gen = p.set_traits(n["cn2"], gen, ["HW_CPU_X86_AVX2"])
    p.set_aggregates(n["cn2"], gen, [])
    index.refresh_provider(record(p, n["cn2"]))
    assert roots(index, VCPU=8) == [n["cn2"]]
    assert roots(index, VCPU=1, MEMORY_MB=1) == [n["cn1"]]
    req = CandidateRequest({"VCPU": 1}, required=["HW_CPU_X86_AVX2"])
    assert index.fit(req).uuids() == [n["cn2"]]
    # cn2 left the pool's aggregate: no shared disk for it any more
    assert roots(index, VCPU=1, DISK_GB=1) == [n["cn1"]]


def test_new_provider_is_appended(two_hosts):
    p, n, index = two_hosts
    new = p.create_provider("cn3")
    g = p.set_inventories(new.uuid, 0, {"VCPU": Inventory(64),
                                        "VGPU": Inventory(2)})
    p.set_aggregates(new.uuid, g, [AGG])
    size = len(index)
    assert index.refresh_provider(record(p, new.uuid)) is True
    assert len(index) == size + 1
    assert roots(index, VCPU=32) == [new.uuid]
    assert roots(index, VGPU=1, DISK_GB=10) == [new.uuid]  # new class, shared disk


def test_provider_becomes_sharing(two_hosts):
    p, n, index = two_hosts
    other = p.create_provider("nfs")
    g = p.set_inventories(other.uuid, 0, {"DISK_GB": Inventory(500)})
    g = p.set_aggregates(other.uuid, g, [AGG])
    index.refresh_provider(record(p, other.uuid))
    fit = index.fit(CandidateRequest({"VCPU": 1, "DISK_GB": 200}))
    assert fit.uuids() == []  # not sharing yet, the pool is too small
    p.set_traits(other.uuid, g, [SHARES])
    index.refresh_provider(record(p, other.uuid))
    fit = index.fit(CandidateRequest({"VCPU": 1, "DISK_GB": 200}))
    assert sorted(fit.uuids()) == sorted([n["cn1"], n["cn2"]])


def test_remove_and_sync(two_hosts):
    p, n, index = two_hosts
    assert index.remove_provider(n["cn1"]) is True
    assert index.remove_provider(n["cn1"]) is False
    assert roots(index, VCPU=1) == [n["cn2"]]
    # sync: cn1, still in placement, is indexed again; cn2, deleted in
    # placement, goes away
    p.delete_provider(n["cn2"])
    changed, removed = index.sync(p.snapshot())
    assert (changed, removed) == (1, 1)
    assert roots(index, VCPU=1) == [n["cn1"]]
    assert index.sync(p.snapshot()) == (0, 0)


def test_released_frees_the_moving_servers_usage(two_hosts):
    p, n, index = two_hosts
    server = {n["cn1"]: {"VCPU": 3, "MEMORY_MB": 512}, n["pool"]: {"DISK_GB": 90}}
    claim(p, server)
    index.sync(p.snapshot())
    flavor = {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 50}
    assert roots(index, **flavor) == []  # the pool holds only 10 GB free
    assert roots(index, released=server, **flavor) == sorted([n["cn1"], n["cn2"]])
    # the index is unchanged afterwards
    assert index.usage(n["cn1"]) == {"VCPU": 3, "MEMORY_MB": 512}
    assert index.usage(n["pool"]) == {"DISK_GB": 90}
    # the same in placement's answer shape: summaries show released usage
    answer = index.candidates(CandidateRequest(flavor), released=server)
    assert answer["provider_summaries"][n["pool"]]["resources"]["DISK_GB"] == \
        {"capacity": 100, "used": 0}
    # and on the fast path's lazily read values
    fit = index.fit(CandidateRequest(flavor), released=[server])
    assert fit.free("DISK_GB").tolist() == [100, 100]
    sums = fit.provider_summaries(range(len(fit)))
    assert sums[n["cn1"]]["resources"]["VCPU"] == {"capacity": 4, "used": 0}


def test_released_ignores_what_the_index_lacks_and_checks_input(two_hosts):
    p, n, index = two_hosts
    stale = {str(uuid.uuid4()): {"VCPU": 1}, n["cn1"]: {"DISK_GB": 5}}
    disk = index.columns["DISK_GB"]
    assert disk.holds(index.row_of[n["pool"]]) and not disk.holds(index.row_of[n["cn1"]])
    assert roots(index, released=stale, VCPU=4) == sorted([n["cn1"], n["cn2"]])
    with pytest.raises(errors.InvalidRequest) as exc:
        index.fit(CandidateRequest({"VCPU": 1}), released={"not-a-uuid": {"VCPU": 1}})
    assert exc.value.value == "not-a-uuid"
    with pytest.raises(errors.InvalidRequest):
        index.fit(CandidateRequest({"VCPU": 1}), released={n["cn1"]: {"VCPU": -1}})
    assert index.usage(n["cn1"]) == {"VCPU": 0, "MEMORY_MB": 0}


def test_refresh_sees_a_delete_that_kept_the_generation(two_hosts):
    p, n, index = two_hosts
    consumer = claim(p, {n["cn1"]: {"VCPU": 4}})
    index.sync(p.snapshot())
    assert roots(index, VCPU=1) == [n["cn2"]]
    gen = record(p, n["cn1"]).provider.generation
    p.delete_allocations(consumer)  # placement bumps no provider generation here
    assert record(p, n["cn1"]).provider.generation == gen
    assert index.refresh_provider(record(p, n["cn1"])) is True
    assert roots(index, VCPU=1) == sorted([n["cn1"], n["cn2"]])
    assert index.refresh_provider(record(p, n["cn1"])) is False
