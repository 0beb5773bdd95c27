"""sync converges in both directions: hosts whose reports say local,
lost-mount or nothing leave our aggregates with --prune (warnings without
it), a host remounted from another source leaves the old provider's
aggregate, a provider nobody names is deleted only when it holds no
allocations, and a second run writes nothing."""

import dataclasses
import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.storage import sync, topology
from scheduler_ext.storage.report import HostReport
from tests.unit.storage.reports import GPFS, GPFS_FS, NFS, shared, three_hosts
from tests.unit.storage.test_sync import Counting, compute


def local(host):
    return HostReport(host, "/var/lib/nova/instances", "local", fstype="xfs")


def lost(host):
    return HostReport(host, "/gpfs1/pool/instances", "lost-mount",
                      lost_mount="/gpfs1")


@pytest.fixture
def client():
    """cn1, cn2 on GPFS and cn3 on NFS, synced."""
    c = EmbeddedPlacement()
    for name in ("cn1", "cn2", "cn3"):
        compute(c, name)
    sync.apply(c, sync.plan(c, topology.build(three_hosts())))
    return c


def aggs(client, name):
    by_name = {p.name: p.uuid for p in client.list_providers()}
    return client.get_aggregates(by_name[name])[1]


def converge(client, reports, prune=True):
    """Plan and apply; then a second plan must be empty."""
    topo = topology.build(reports)
    first = sync.plan(client, topo, prune=prune)
    sync.apply(client, first)
    counting = Counting(client)
    again = sync.plan(counting, topo, prune=prune)
    assert again.changes == [] and sync.apply(counting, again) == 0
    assert counting.writes == []
    return first


GPFS_AGG = topology.aggregate_uuid(GPFS_FS)
GPFS_RP = topology.provider_uuid(GPFS_FS)


@pytest.mark.parametrize("report, why", [
    (local("cn2"), "its report says local"),
    (lost("cn2"), "its report says lost-mount"),
    (None, "no report for it"),
])
def test_a_host_that_lost_the_storage_leaves_the_aggregate(client, report, why):
    reports = [shared("cn1", seen=["cn1"]), three_hosts()[2]] + \
        ([report] if report else [])
    # a missing host is found only by reading every provider's aggregates
    dry = sync.plan(client, topology.build(reports), check_strays=report is None)
    assert dry.changes == []
    assert any(w.startswith(f"host cn2") and why in w and "--prune removes it"
               in w for w in dry.warnings), dry.warnings
    plan = converge(client, reports)
    assert [(c.kind, c.name, c.value, c.why) for c in plan.changes] == [
        ("remove-aggregate", "cn2", GPFS_AGG, why)]
    assert aggs(client, "cn2") == frozenset()
    assert aggs(client, "cn1") == {GPFS_AGG}


def test_an_unconfirmed_host_is_left_alone(client):
    unsure = HostReport("cn2", "/gpfs1/pool/instances", "unconfirmed")
    plan = converge(client, [shared("cn1", seen=["cn1"]), unsure])
    assert not any(c.name == "cn2" for c in plan.changes)
    assert aggs(client, "cn2") == {GPFS_AGG}
    assert any("host cn2, path /gpfs1/pool/instances: unconfirmed" in w
               for w in plan.warnings)


def test_every_host_losing_the_mount_deletes_the_empty_provider(client):
    plan = converge(client, [lost("cn1"), lost("cn2"), three_hosts()[2]])
    assert sorted((c.kind, c.name) for c in plan.changes) == [
        ("delete-provider", f"shared-storage:{GPFS_FS}"),
        ("remove-aggregate", "cn1"), ("remove-aggregate", "cn2")]
    assert GPFS_RP not in {p.uuid for p in client.list_providers()}


def test_a_provider_holding_allocations_is_never_deleted(client):
    client.put_allocations(str(uuid.uuid4()), AllocationWrite(
        {GPFS_RP: {"DISK_GB": 20}}, "p", "u", None))
    plan = converge(client, [lost("cn1"), lost("cn2"), three_hosts()[2]])
    assert [c.kind for c in plan.changes] == ["remove-aggregate"] * 2
    assert GPFS_RP in {p.uuid for p in client.list_providers()}
    assert any(f"shared-storage:{GPFS_FS}: no report names it, but it holds "
               "allocations of 1 consumer(s); kept" in w for w in plan.warnings)


def test_a_host_remounted_from_another_source_moves_to_the_new_provider(client):
    # cn3 used to reach the NFS export by name; now by address, which the
    # identity resolves to another filesystem name: one aggregate, not two
    moved = dataclasses.replace(
        three_hosts()[2], domain="nfs:10.0.0.20:/export/nova",
        filesystem="nfs:10.0.0.20:/export/nova")
    old_fs = NFS.rsplit(":", 1)[0]
    plan = converge(client, three_hosts()[:2] + [moved])
    kinds = [(c.kind, c.name) for c in plan.changes]
    assert ("remove-aggregate", "cn3") in kinds
    assert ("delete-provider", f"shared-storage:{old_fs}") in kinds
    assert aggs(client, "cn3") == {topology.aggregate_uuid(moved.filesystem)}


def test_prune_without_reports_of_other_hosts_keeps_foreign_aggregates(client):
    other = str(uuid.uuid4())
    by_name = {p.name: p.uuid for p in client.list_providers()}
    gen, current = client.get_aggregates(by_name["cn3"])
    client.set_aggregates(by_name["cn3"], gen, current | {other})
    converge(client, three_hosts())
    assert other in aggs(client, "cn3")


def test_a_provider_deleted_between_the_list_and_its_read_is_skipped(client):
    stray = compute(client, "cn9")

    class DeletedMeanwhile:
        def __getattr__(self, name):
            return getattr(client, name)

        def get_aggregates(self, rp):
            if rp == stray:
                raise errors.NotFound("resource provider not found")
            return client.get_aggregates(rp)

    plan = sync.plan(DeletedMeanwhile(), topology.build(three_hosts()),
                     prune=True)
    assert plan.changes == [] and plan.refusals == []
