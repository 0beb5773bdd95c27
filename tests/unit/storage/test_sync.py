"""Applying the topology to placement: idempotent, dry run by default (the
plan reads only), refusing to shrink below what is allocated."""

import uuid

import pytest

from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.model import SHARING_TRAIT
from scheduler_ext.storage import fleet, sync, topology
from scheduler_ext.storage.errors import ReportError, SyncRefused
from tests.unit.storage.reports import (
    GPFS, GPFS_FS, NFS, NFS_FS, T2, shared, three_hosts)

WRITES = ("create_provider", "set_inventories", "set_traits", "set_aggregates",
          "put_allocations", "post_allocations", "delete_allocations",
          "delete_provider", "create_trait", "create_resource_class")


class Counting:
    """A client proxy that counts the writes made through it."""

    def __init__(self, client):
        self.client, self.writes = client, []

    def __getattr__(self, name):
        attr = getattr(self.client, name)
        if name in WRITES:
            def write(*args, **kwargs):
                self.writes.append(name)
                return attr(*args, **kwargs)
            return write
        return attr


def compute(client, name, disk=False):
    invs = {"VCPU": Inventory(16), "MEMORY_MB": Inventory(65536)}
    if disk:
        invs["DISK_GB"] = Inventory(200)
    prov = client.create_provider(name)
    client.set_inventories(prov.uuid, prov.generation, invs)
    return prov.uuid


@pytest.fixture
def client():
    c = EmbeddedPlacement()
    for name in ("cn1", "cn2", "cn3"):
        compute(c, name)
    return c


def test_apply_creates_providers_and_aggregates_then_a_second_run_writes_nothing(client):
    topo = topology.build(three_hosts())
    counting = Counting(client)
    first = sync.plan(counting, topo)
    assert counting.writes == []            # a plan (the dry run) only reads
    assert sync.apply(counting, first) == len(first.changes) == 11
    gpfs, nfs = topo.providers
    for spec in topo.providers:
        _, invs = client.get_inventories(spec.uuid)
        assert invs == {"DISK_GB": spec.inventory}
        assert client.get_traits(spec.uuid)[1] == {SHARING_TRAIT}
        assert client.get_aggregates(spec.uuid)[1] == {spec.aggregate}
    by_name = {p.name: p.uuid for p in client.list_providers()}
    assert client.get_aggregates(by_name["cn1"])[1] == {gpfs.aggregate}
    assert client.get_aggregates(by_name["cn2"])[1] == {gpfs.aggregate}
    assert client.get_aggregates(by_name["cn3"])[1] == {nfs.aggregate}
    counting.writes.clear()
    second = sync.plan(counting, topo)
    assert second.changes == [] and sync.apply(counting, second) == 0
    assert counting.writes == []


def test_existing_aggregates_and_traits_are_kept(client):
    by_name = {p.name: p.uuid for p in client.list_providers()}
    other = str(uuid.uuid4())
    gen, _ = client.get_aggregates(by_name["cn1"])
    client.set_aggregates(by_name["cn1"], gen, [other])
    topo = topology.build(three_hosts())
    sync.apply(client, sync.plan(client, topo))
    assert client.get_aggregates(by_name["cn1"])[1] == {
        other, topo.providers[0].aggregate}


def test_a_grown_filesystem_updates_the_inventory(client):
    sync.apply(client, sync.plan(client, topology.build(three_hosts())))
    bigger = topology.build([shared("cn1", total_gib=2000, free_gib=1500,
                                    available_gib=1490)])
    plan = sync.plan(client, bigger)
    assert [c.kind for c in plan.changes] == ["set-inventory"]
    sync.apply(client, plan)
    assert client.get_inventories(bigger.providers[0].uuid)[1]["DISK_GB"].total == 2000


def test_shrinking_below_the_allocated_amount_is_refused_and_writes_nothing(client):
    topo = topology.build(three_hosts())
    sync.apply(client, sync.plan(client, topo))
    ss = topo.providers[0].uuid
    client.put_allocations(str(uuid.uuid4()), AllocationWrite(
        {ss: {"DISK_GB": 800}}, "p", "u", None))
    smaller = topology.build([shared("cn1", total_gib=700, free_gib=100,
                                     available_gib=100)])
    counting = Counting(client)
    plan = sync.plan(counting, smaller)
    assert len(plan.refusals) == 1
    assert "below the 800 GiB allocated" in plan.refusals[0]
    assert GPFS_FS in plan.refusals[0] and "cn1" in plan.refusals[0]
    with pytest.raises(SyncRefused):
        sync.apply(counting, plan)
    assert counting.writes == []
    assert client.get_inventories(ss)[1]["DISK_GB"].total == 1000


def test_a_provider_holding_the_name_with_another_uuid_is_refused(client):
    topo = topology.build(three_hosts())
    client.create_provider(topo.providers[0].name)
    plan = sync.plan(client, topo)
    assert "the name is held by provider" in plan.refusals[0]


def test_warnings_local_disk_unknown_host_and_stray_member(client):
    compute(client, "cn4", disk=True)
    topo = topology.build(three_hosts() + [
        shared("cn4", seen=["cn1", "cn2", "cn4"]),
        shared("ghost", seen=["cn1", "cn2", "cn4", "ghost"])])
    plan = sync.plan(client, topo)
    joined = "\n".join(plan.warnings)
    assert ("host cn4, path /var/lib/nova/instances: compute node cn4 shares "
            f"shared-storage:{GPFS_FS} but still reports its own DISK_GB (200 GiB)"
            in joined)
    assert "bug 1784020" in joined
    assert "host ghost, path /var/lib/nova/instances: no compute node provider" \
        in joined
    sync.apply(client, plan)
    stray = compute(client, "cn5")
    gen, _ = client.get_aggregates(stray)
    client.set_aggregates(stray, gen, [topo.providers[0].aggregate])
    assert not any("cn5" in w for w in sync.plan(client, topo).warnings)
    again = sync.plan(client, topo, check_strays=True)
    assert again.changes == []
    assert any(w.startswith("host cn5: no report for it; --prune removes it "
                            f"from shared-storage:{GPFS_FS}")
               for w in again.warnings)


def test_storage_builds_the_fleet_from_reports_on_an_empty_placement():
    client = EmbeddedPlacement()
    cpu = {"VCPU": Inventory(8), "MEMORY_MB": Inventory(16384)}
    built = fleet.storage(client, three_hosts(),
                          compute_inventories={h: cpu for h in ("cn1", "cn2", "cn3")})
    assert set(built.hosts) == {"cn1", "cn2", "cn3"}
    assert set(built.sharing) == {GPFS, NFS}
    for ss, agg in built.aggregates.items():
        assert client.get_aggregates(ss)[1] == {agg}
    assert fleet.storage(client, three_hosts()).writes == 0
    with pytest.raises(ReportError, match="no compute inventory given for host cn7"):
        fleet.storage(client, [shared("cn7")])
