"""Host reports -> one sharing provider per storage domain; contradictory
reports are errors naming the hosts and paths."""

import dataclasses
import uuid

import pytest

from scheduler_ext.storage import topology
from scheduler_ext.storage.errors import ReportError
from scheduler_ext.storage.report import HostReport
from tests.unit.storage.reports import (
    GPFS, GPFS_FS, NFS, NFS_FS, T1, T2, shared, three_hosts)


def test_three_hosts_on_two_domains_make_two_providers():
    topo = topology.build(three_hosts(), reserved_disk_gb=5)
    assert [(p.filesystem, p.domains, p.members) for p in topo.providers] == [
        (GPFS_FS, (GPFS,), ("cn1", "cn2")), (NFS_FS, (NFS,), ("cn3",))]
    gpfs, nfs = topo.providers
    # 1000 GiB; 10 GiB root-only reserve (free 600 - available 590) + 5
    assert (gpfs.inventory.total, gpfs.inventory.reserved,
            gpfs.inventory.max_unit) == (1000, 15, 1000)
    assert (nfs.inventory.total, nfs.inventory.reserved) == (500, 5)
    assert gpfs.name == f"shared-storage:{GPFS_FS}"
    assert topo.warnings == ()


def test_uuids_are_derived_from_the_filesystem_only():
    a = topology.build(three_hosts()).providers[0]
    b = topology.build([shared("other", seen=["other"])],
                       allocation_ratio=2.0).providers[0]
    assert (a.uuid, a.aggregate) == (b.uuid, b.aggregate)
    assert uuid.UUID(a.uuid).version == 5 and a.uuid != a.aggregate
    assert a.uuid == topology.provider_uuid(GPFS_FS)


def test_a_long_domain_name_fits_placement():
    name = topology.provider_name("nfs:filer:/" + "x" * 300)
    assert len(name) == topology.MAX_NAME and name.endswith(
        topology.provider_uuid("nfs:filer:/" + "x" * 300)[:8])


def test_the_smallest_size_and_largest_reserve_win():
    topo = topology.build([
        shared("cn1", seen=["cn1"], total_gib=1000, available_gib=580),
        shared("cn2", seen=["cn1", "cn2"], total_gib=1005)])
    assert (topo.providers[0].inventory.total,
            topo.providers[0].inventory.reserved) == (1000, 20)


def test_one_domain_name_with_two_tokens_is_a_contradiction():
    with pytest.raises(ReportError) as exc:
        topology.build([shared("cn1"), shared("cn2", token=T2)])
    text = str(exc.value)
    assert "host cn1, path /var/lib/nova/instances" in text
    assert "host cn2, path /var/lib/nova/instances" in text
    assert "different domain tokens" in text


def test_one_token_reached_as_two_storages_is_a_contradiction():
    with pytest.raises(ReportError, match="reached as different storages"):
        topology.build([shared("cn1"), shared(
            "cn2", domain="gpfs:gpfs1b:/pool/instances", seen=["cn1", "cn2"])])


def test_hosts_that_never_saw_each_other_are_a_contradiction():
    with pytest.raises(ReportError, match="neither sees the other's host marker"):
        topology.build([shared("cn1", seen=["cn1"]), shared("cn2", seen=["cn2"])])


def test_sizes_differing_beyond_tolerance_are_a_contradiction():
    reports = [shared("cn1"), shared("cn2", seen=["cn1", "cn2"], total_gib=900)]
    with pytest.raises(ReportError, match="sizes differ by more than 1.0%"):
        topology.build(reports)
    assert topology.build(reports, size_tolerance=0.2).providers[0] \
        .inventory.total == 900


def test_two_reports_for_one_host_are_refused():
    with pytest.raises(ReportError, match="two reports for host cn1"):
        topology.build([shared("cn1"), shared("cn1", path="/other")])


def test_lost_mounts_and_unconfirmed_reports_are_left_out_with_a_warning():
    lost = HostReport("cn4", "/gpfs1/pool/instances", "lost-mount",
                      lost_mount="/gpfs1", problems=("host cn4, ...: gone",))
    unconfirmed = HostReport("cn5", "/srv/gfs2/instances", "unconfirmed")
    local = HostReport("cn6", "/var/lib/nova/instances", "local")
    topo = topology.build(three_hosts() + [lost, unconfirmed, local])
    assert [p.members for p in topo.providers] == [("cn1", "cn2"), ("cn3",)]
    assert topo.warnings[0].startswith("host cn4, path /gpfs1/pool/instances: "
                                       "lost-mount, left out")
    assert topo.warnings[1].startswith("host cn5, path /srv/gfs2/instances: "
                                       "unconfirmed")
    assert len(topo.warnings) == 2


def test_members_without_a_token_are_not_confirmed():
    reports = [shared("cn1"), dataclasses.replace(shared("cn2"), token=None)]
    topo = topology.build(reports)
    assert topo.providers[0].members == ("cn1",)
    assert "host cn2" in topo.warnings[0] and "cannot be confirmed" in topo.warnings[0]
    alone = topology.build([dataclasses.replace(shared("cn9"), token=None)])
    assert alone.providers[0].members == ("cn9",)
    assert "one member and no domain token" in alone.warnings[0]


def test_a_filesystem_below_one_gib_is_refused():
    with pytest.raises(ReportError, match="smaller than 1 GiB"):
        topology.build([dataclasses.replace(shared("cn1"), total_bytes=1000)])
