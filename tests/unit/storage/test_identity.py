"""A filesystem is named by what the cluster says it is: an NFS server by
name or by address, CephFS by either mount syntax, GPFS with its cluster,
GFS2/OCFS2 by the block device's filesystem UUID give one identity on
every host; several directories on one filesystem are one provider."""

import dataclasses

import pytest

from scheduler_ext.storage import identity, topology
from tests.unit.storage.fakefs import Storage
from tests.unit.storage.hosts import discover, host_with
from tests.unit.storage.reports import shared

FSID = "4b5c8c0a-ff60-454b-a1b4-9747aa737d19"
CLUSTER_ID = "317908494312547875"


@dataclasses.dataclass
class FakeFacts:
    """What the cluster would say, from tables (``ClusterFacts``)."""

    cluster_id: str | None = None
    fsids: dict = dataclasses.field(default_factory=dict)
    dns: dict = dataclasses.field(default_factory=dict)
    uuids: dict = dataclasses.field(default_factory=dict)

    def gpfs_cluster_id(self):
        return self.cluster_id

    def ceph_fsid(self, cluster):
        return self.fsids.get(cluster)

    def server_addresses(self, server):
        return tuple(self.dns.get(server, ()))

    def device_uuid(self, device):
        return self.uuids.get(device)


FILER = FakeFacts(dns={"filer01.example.net": ["10.0.0.20", "fd00::20"],
                       "10.0.0.20": ["10.0.0.20", "fd00::20"]})


def nfs_host(storage, fixture, host, facts):
    return discover(host_with("/var/lib/nova/instances", storage, (0, 80)),
                    fixture, "/var/lib/nova/instances", host=host, facts=facts)


def test_nfs_by_name_and_by_address_is_one_domain_and_one_provider():
    export = Storage(total_gib=500, free_gib=500)
    by_name = nfs_host(export, "nfs", "cn1", FILER)
    by_address = nfs_host(export, "nfs_by_address", "cn2", FILER)
    assert by_name.domain == by_address.domain == "nfs:10.0.0.20:/export/nova"
    assert by_name.filesystem == by_address.filesystem == \
        "nfs:10.0.0.20:/export/nova"
    assert by_name.problems == by_address.problems == ()
    topo = topology.build([by_name, by_address])
    assert [p.members for p in topo.providers] == [("cn1", "cn2")]


def test_nfs_unresolved_keeps_the_source_and_says_so():
    report = nfs_host(Storage(), "nfs", "cn1", FakeFacts())
    assert report.domain == "nfs:filer01.example.net:/export/nova"
    assert "server filer01.example.net not resolved" in report.problems[0]


def test_cephfs_old_and_new_mount_syntax_are_one_filesystem():
    cephfs = Storage(dirs=["/volumes/_nogroup/nova"])
    facts = FakeFacts(fsids={"ceph": FSID})
    old = discover(host_with("/var/lib/nova/instances", cephfs, (0, 60),
                             root="/volumes/_nogroup/nova"), "ceph",
                   "/var/lib/nova/instances", host="cn1", facts=facts)
    new = discover(host_with("/var/lib/nova/instances", cephfs, (0, 61),
                             root="/volumes/_nogroup/nova"),
                   "ceph_new_syntax_nova", "/var/lib/nova/instances",
                   host="cn2", facts=facts)
    assert old.domain == new.domain == f"ceph:{FSID}.cephfs:/volumes/_nogroup/nova"
    assert old.filesystem == new.filesystem == f"ceph:{FSID}.cephfs"


def test_gpfs_is_named_by_its_cluster_and_device():
    gpfs = Storage(dirs=["/pool/instances"])
    report = discover(host_with("/gpfs1", gpfs, (0, 45)), "gpfs_pool_subdir",
                      "/gpfs1/pool/instances",
                      facts=FakeFacts(cluster_id=CLUSTER_ID))
    assert report.domain == f"gpfs:{CLUSTER_ID}/gpfs1:/pool/instances"
    assert report.filesystem == f"gpfs:{CLUSTER_ID}/gpfs1"
    alone = discover(host_with("/gpfs1", gpfs, (0, 45)), "gpfs_pool_subdir",
                     "/gpfs1/pool/instances", host="cn2")
    assert "GPFS cluster id not read" in alone.problems[-1]


def test_ocfs2_is_named_by_the_filesystem_uuid_of_its_disk():
    disk = Storage(dirs=["/instances"])
    facts = FakeFacts(uuids={"/dev/sdc1": "a3b1c2d4-0000-4000-8000-00000000000a"})
    report = discover(host_with("/srv/ocfs2", disk, (8, 33)), "ocfs2",
                      "/srv/ocfs2/instances", facts=facts)
    assert report.filesystem == "ocfs2:uuid=a3b1c2d4-0000-4000-8000-00000000000a"
    assert report.domain == f"{report.filesystem}:/instances"


def test_two_instance_directories_on_one_gpfs_are_one_provider():
    fs = f"gpfs:{CLUSTER_ID}/gpfs1"
    a = f"{fs}:/pool/instances-a"
    b = f"{fs}:/pool/instances-b"
    topo = topology.build([
        shared("cn1", a, seen=["cn1", "cn2"], filesystem=fs),
        shared("cn2", a, seen=["cn1", "cn2"], filesystem=fs),
        shared("cn3", b, token="33333333-3333-4333-8333-333333333333",
               seen=["cn3"], filesystem=fs)])
    assert len(topo.providers) == 1
    (spec,) = topo.providers
    assert (spec.filesystem, spec.domains, spec.members) == (
        fs, (a, b), ("cn1", "cn2", "cn3"))
    assert spec.inventory.total == 1000           # once, not 2000
    assert any("2 instance directories on one filesystem share its capacity"
               in w for w in topo.warnings)


def test_a_report_without_a_filesystem_is_its_own_filesystem():
    old = dataclasses.replace(shared("cn1"), filesystem=None)
    (spec,) = topology.build([old]).providers
    assert spec.filesystem == old.domain


MMLSCLUSTER = (
    "mmlscluster:clusterSummary:HEADER:version:reserved:reserved:clusterName:"
    "clusterId:uidDomain:rshPath:rshSudoWrapper:rcpPath:rcpSudoWrapper:"
    "repositoryType:primaryServer:secondaryServer:\n"
    f"mmlscluster:clusterSummary:0:1:::gpfs.example.net:{CLUSTER_ID}:"
    "example.net:/usr/bin/ssh:no:/usr/bin/scp:no:CCR:::\n"
    "mmlscluster:clusterNode:HEADER:version:reserved:reserved:nodeNumber:\n"
    "mmlscluster:clusterNode:0:1:::1:\n")


@pytest.mark.parametrize("text, expected", [
    (MMLSCLUSTER, CLUSTER_ID),
    ("", None),
    ("mmlscluster:clusterSummary:0:1:::x:1:\n", None),     # no header
])
def test_parse_mmlscluster(text, expected):
    assert identity.parse_mmlscluster(text) == expected


@pytest.mark.parametrize("text, expected", [
    (f"[global]\nfsid = {FSID.upper()}\nmon_host = 10.0.0.1\n", FSID),
    ("[global]\nmon_host = 10.0.0.1\n", None),
    ("not an ini file", None),
])
def test_parse_ceph_conf(text, expected):
    assert identity.parse_ceph_conf(text) == expected


def test_smallest_address_prefers_ipv4_then_the_numeric_order():
    assert identity.smallest_address(("fd00::1", "10.0.0.9", "10.0.0.10")) \
        == "10.0.0.9"
    assert identity.smallest_address(("not-an-address",)) is None


def test_system_facts_read_ceph_conf_and_by_uuid(tmp_path):
    (tmp_path / "ceph.conf").write_text(f"[global]\nfsid = {FSID}\n")
    by_uuid = tmp_path / "by-uuid"
    by_uuid.mkdir()
    disk = tmp_path / "sdc1"
    disk.write_text("")
    (by_uuid / "ABCD-1234").symlink_to(disk)
    facts = identity.SystemFacts(etc_ceph=str(tmp_path), by_uuid=str(by_uuid))
    assert facts.ceph_fsid("ceph") == FSID
    assert facts.ceph_fsid("other") is None
    assert facts.device_uuid(str(disk)) == "abcd-1234"
    assert facts.device_uuid(str(tmp_path / "nope")) is None
    assert facts.server_addresses("127.0.0.1")[:1] == ("127.0.0.1",)
