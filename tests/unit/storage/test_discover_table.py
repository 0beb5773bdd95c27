"""The discovery table: mountinfo and fstab layouts of every filesystem seed
001 names (IBM Storage Scale/GPFS, WEKA, Quobyte, GFS2, OCFS2, CephFS, NFS)
and the others we recognise, plus the layouts that hide a lost mount (bind
mounts in fstab, overmounts, untriggered autofs, a trailing ``/`` in fstab,
unknown network filesystems), each with the expected state, class and
filesystem identity. Nothing is ``local`` without evidence.

``python -m tests.unit.storage.test_discover_table`` prints the table with
the expected and the actual answer side by side."""

from __future__ import annotations

import dataclasses
import os
import posixpath

import pytest

from scheduler_ext.storage import discover as se_discover
from scheduler_ext.storage import mountinfo
from scheduler_ext.storage.probe import Probe
from tests.unit.storage.fakefs import FakeHost, Storage
from tests.unit.storage.test_identity import CLUSTER_ID, FSID, FakeFacts

BASE = """\
22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
27 22 252:2 / /var/lib/nova rw,relatime shared:30 - xfs /dev/vda2 rw,attr2
"""
FACTS = FakeFacts(cluster_id=CLUSTER_ID, fsids={"ceph": FSID},
                  dns={"filer01.example.net": ["10.0.0.20"],
                       "10.0.0.20": ["10.0.0.20"]},
                  uuids={"/dev/sdc1": "6d1f0c7e-ocfs2"})
NOVA = "/var/lib/nova/instances"


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    lines: str                 # mountinfo lines added to BASE
    path: str
    state: str
    fs_class: str
    filesystem: str | None
    fstab: str = ""
    expect_shared: bool = False
    symlink: str | None = None  # path is a symlink to this
    device: tuple[int, int] | None = None   # the path's device, if not the mount's


def m(mid, parent, dev, root, point, fstype, source, opts="rw"):
    return f"{mid} {parent} {dev} {root} {point} rw,relatime - {fstype} {source} {opts}\n"


CASES = [
    # ---- seed 001's filesystems
    Case("gpfs pool in a subdirectory", m(40, 22, "0:45", "/", "/gpfs1", "gpfs", "gpfs1"),
         "/gpfs1/pool/instances", "shared", "parallel", f"gpfs:{CLUSTER_ID}/gpfs1"),
    Case("gpfs bind-mounted on the instances path",
         m(40, 22, "0:45", "/", "/gpfs1", "gpfs", "gpfs1")
         + m(42, 27, "0:45", "/pool/instances", NOVA, "gpfs", "gpfs1"),
         NOVA, "shared", "parallel", f"gpfs:{CLUSTER_ID}/gpfs1"),
    Case("gpfs reached through a symlink", m(40, 22, "0:45", "/", "/gpfs1", "gpfs", "gpfs1"),
         NOVA, "shared", "parallel", f"gpfs:{CLUSTER_ID}/gpfs1",
         symlink="/gpfs1/pool/instances"),
    Case("gpfs second device", m(41, 22, "0:46", "/", "/gpfs10", "gpfs", "/dev/gpfs10"),
         "/gpfs10/nova", "shared", "parallel", f"gpfs:{CLUSTER_ID}/gpfs10"),
    Case("wekafs", m(50, 22, "0:16625", "/", "/mnt/weka", "wekafs", "backend-0/default"),
         "/mnt/weka/nova", "shared", "parallel", "wekafs:default"),
    Case("quobyte", m(60, 27, "0:52", "/", "/var/lib/nova/mnt/quobyte", "fuse.quobyte",
                      "quobyte@registry.example.net:7861/nova-volume"),
         "/var/lib/nova/mnt/quobyte/instances", "shared", "fuse", "quobyte:nova-volume"),
    Case("gfs2 with a lock table", m(70, 22, "253:3", "/", "/srv/gfs2", "gfs2",
                                     "/dev/mapper/vg-gfs2", "rw,locktable=hci:nova"),
         "/srv/gfs2/instances", "shared", "clustered", "gfs2:hci:nova"),
    Case("gfs2 named by its token only", m(70, 22, "253:3", "/", "/srv/gfs2", "gfs2",
                                           "/dev/mapper/vg-gfs2"),
         "/srv/gfs2/instances", "shared", "clustered", None),
    Case("ocfs2 named by its disk's uuid", m(71, 22, "8:33", "/", "/srv/ocfs2", "ocfs2",
                                             "/dev/sdc1"),
         "/srv/ocfs2/instances", "shared", "clustered", "ocfs2:uuid=6d1f0c7e-ocfs2"),
    Case("ocfs2 on an unknown disk", m(72, 22, "8:49", "/", "/srv/ocfs2b", "ocfs2",
                                       "/dev/sdd1"),
         "/srv/ocfs2b/instances", "shared", "clustered", None),
    Case("cephfs old syntax", m(80, 27, "0:60", "/", NOVA, "ceph",
                                "10.0.0.1:6789,10.0.0.2:6789:/volumes/nova",
                                "rw,name=nova,mds_namespace=cephfs"),
         NOVA, "shared", "clustered", f"ceph:{FSID}.cephfs"),
    Case("cephfs new syntax", m(81, 22, "0:61", "/", "/mnt/cephfs", "ceph",
                                f"nova@{FSID}.cephfs=/"),
         "/mnt/cephfs/nova", "shared", "clustered", f"ceph:{FSID}.cephfs"),
    Case("ceph-fuse", m(90, 22, "0:70", "/", "/mnt/cephfuse", "fuse.ceph-fuse", "ceph-fuse"),
         "/mnt/cephfuse/nova", "shared", "fuse", None),
    Case("nfs v3 by name", m(100, 27, "0:80", "/", NOVA, "nfs",
                             "filer01.example.net:/export/nova"),
         NOVA, "shared", "nfs", "nfs:10.0.0.20:/export/nova"),
    Case("nfs v3 by address", m(100, 27, "0:80", "/", NOVA, "nfs", "10.0.0.20:/export/nova"),
         NOVA, "shared", "nfs", "nfs:10.0.0.20:/export/nova"),
    Case("nfs4 unresolved server", m(101, 22, "0:81", "/", "/mnt/nfs4", "nfs4",
                                     "filer09:/nova"),
         "/mnt/nfs4/instances", "shared", "nfs", "nfs:filer09:/nova"),
    # ---- other shared filesystems
    Case("glusterfs", m(110, 27, "0:90", "/", NOVA, "fuse.glusterfs",
                        "gluster1.example.net:/gv-nova"),
         NOVA, "shared", "fuse", "glusterfs:gv-nova"),
    Case("lustre", m(120, 22, "0:100", "/", "/lustre", "lustre",
                     "10.1.0.1@o2ib:10.1.0.2@o2ib:/scratch"),
         "/lustre/nova/instances", "shared", "parallel", "lustre:scratch"),
    Case("beegfs", m(130, 22, "0:110", "/", "/mnt/beegfs", "beegfs", "beegfs_nodev"),
         "/mnt/beegfs/nova", "shared", "parallel", None),
    Case("smb", m(140, 22, "0:120", "/", "/mnt/smb", "cifs", "//filer01.example.net/nova"),
         "/mnt/smb/instances", "shared", "nfs", "cifs:10.0.0.20/nova"),
    Case("nfs stacked over a local disk", m(160, 27, "252:3", "/", NOVA, "xfs", "/dev/vda3")
         + m(161, 160, "0:140", "/", NOVA, "nfs4", "filer03:/nova"),
         NOVA, "shared", "nfs", "nfs:filer03:/nova"),
    # ---- local, with evidence
    Case("local xfs", "", NOVA, "local", "local", None),
    Case("local root ext4", "", "/srv/nova", "local", "local", None),
    Case("local zfs", m(170, 27, "0:200", "/", NOVA, "zfs", "tank/nova"),
         NOVA, "local", "local", None),
    # ---- lost mounts
    Case("gpfs in fstab, not mounted", "", "/gpfs1/pool/instances", "lost-mount", "", None,
         fstab="/dev/gpfs1 /gpfs1 gpfs rw,dev=gpfs1,noauto 0 0\n"),
    Case("fstab mount point with a trailing slash", "", "/gpfs1/pool/instances",
         "lost-mount", "", None, fstab="/dev/gpfs1 /gpfs1/ gpfs rw 0 0\n"),
    Case("fstab bind mount not mounted", m(40, 22, "0:45", "/", "/gpfs1", "gpfs", "gpfs1"),
         NOVA, "lost-mount", "", None,
         fstab=f"/gpfs1/pool/instances {NOVA} none bind 0 0\n"),
    Case("fstab bind mount of a missing gpfs", "", NOVA, "lost-mount", "", None,
         fstab=f"/dev/gpfs1 /gpfs1 gpfs rw 0 0\n/gpfs1/pool/instances {NOVA} none bind 0 0\n"),
    Case("fstab bind mount mounted", m(40, 22, "0:45", "/", "/gpfs1", "gpfs", "gpfs1")
         + m(42, 27, "0:45", "/pool/instances", NOVA, "gpfs", "gpfs1"),
         NOVA, "shared", "parallel", f"gpfs:{CLUSTER_ID}/gpfs1",
         fstab=f"/gpfs1/pool/instances {NOVA} none bind 0 0\n"),
    Case("tmpfs over gpfs", m(40, 22, "0:45", "/", "/gpfs1", "gpfs", "gpfs1")
         + m(43, 40, "0:47", "/", "/gpfs1", "tmpfs", "tmpfs"),
         "/gpfs1/pool/instances", "lost-mount", "", None),
    Case("ext4 over an nfs tree", m(170, 22, "0:150", "/", "/srv", "nfs4", "filer04:/srv")
         + m(171, 170, "0:151", "/", "/srv/instances", "nfs4", "filer05:/instances")
         + m(172, 170, "252:4", "/", "/srv", "ext4", "/dev/vda4"),
         "/srv/instances", "lost-mount", "", None),
    Case("tmpfs where fstab puts gpfs", m(43, 22, "0:47", "/", "/gpfs1", "tmpfs", "tmpfs"),
         "/gpfs1/pool/instances", "lost-mount", "", None,
         fstab="/dev/gpfs1 /gpfs1 gpfs rw 0 0\n"),
    Case("untriggered autofs of an fstab nfs", m(180, 27, "0:160", "/", NOVA, "autofs",
                                                 "systemd-1", "rw,fd=40,direct"),
         NOVA, "lost-mount", "", None,
         fstab=f"filer01.example.net:/export/nova {NOVA} nfs x-systemd.automount 0 0\n"),
    Case("untriggered autofs", m(180, 27, "0:160", "/", NOVA, "autofs", "systemd-1",
                                 "rw,fd=40,direct"),
         NOVA, "unconfirmed", "", None),
    Case("triggered autofs", m(180, 27, "0:160", "/", NOVA, "autofs", "systemd-1")
         + m(181, 180, "0:161", "/", NOVA, "nfs", "10.0.0.20:/export/nova"),
         NOVA, "shared", "nfs", "nfs:10.0.0.20:/export/nova"),
    Case("expected shared, found local", "", NOVA, "lost-mount", "", None,
         expect_shared=True),
    # ---- neither known local nor known shared
    Case("juicefs", m(190, 27, "0:170", "/", NOVA, "fuse.juicefs", "JuiceFS:nova"),
         NOVA, "unconfirmed", "fuse", None),
    Case("vxfs", m(191, 27, "199:1", "/", NOVA, "vxfs", "/dev/vx/dsk/dg/nova"),
         NOVA, "unconfirmed", "unknown", None),
    Case("sshfs", m(192, 27, "0:171", "/", NOVA, "fuse.sshfs", "nova@storage:/srv"),
         NOVA, "unconfirmed", "fuse", None),
    Case("device disagrees with the mount", m(100, 27, "0:80", "/", NOVA, "nfs",
                                              "10.0.0.20:/export/nova"),
         NOVA, "unconfirmed", "nfs", None, device=(0, 99)),
]


def fake_host(case: Case) -> FakeHost:
    """A filesystem that agrees with the case's mountinfo: each visible
    mount a storage holding the directories the path needs."""
    entries = mountinfo.parse(BASE + case.lines)
    target = case.symlink or case.path
    holder = mountinfo.resolve(target, entries)
    mounts = {}
    for e in mountinfo.visible(entries):
        storage = Storage(dirs=["/"])
        dev = (e.major, e.minor)
        if e is holder:
            storage.mkdirs(mountinfo.location(e, target))
            dev = case.device or dev
        mounts[e.mount_point] = (storage, e.root, dev)
    symlinks = {case.path: case.symlink} if case.symlink else {}
    return FakeHost(mounts, symlinks=symlinks)


def answer(case: Case):
    probe = Probe("cn1", 5.0, fake_host(case).ops())
    tables = se_discover.Tables(BASE + case.lines, case.fstab)
    report = se_discover.discover(probe, case.path, tables, facts=FACTS,
                                  expect_shared=case.expect_shared)
    return report.state, report.fs_class, report.filesystem, report


def test_the_table_has_every_seed_filesystem_and_layout():
    assert len(CASES) >= 30
    assert len({c.name for c in CASES}) == len(CASES)
    states = {c.state for c in CASES}
    assert states == {"shared", "local", "lost-mount", "unconfirmed"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_discovery_table(case):
    state, fs_class, filesystem, report = answer(case)
    assert (state, fs_class, filesystem) == \
        (case.state, case.fs_class, case.filesystem), report.problems
    if state == "shared":
        assert report.domain and report.domain.startswith(
            filesystem or f"{report.family}:token=")
    else:
        assert report.domain is None
    if state in ("lost-mount", "unconfirmed"):
        assert report.problems and report.problems[0].startswith(
            f"host cn1, path {case.path}")


def main() -> None:
    width = max(len(c.name) for c in CASES)
    print(f"{'case':{width}}  {'expected':40}  actual")
    for c in CASES:
        state, fs_class, filesystem, _ = answer(c)
        exp = f"{c.state} {c.fs_class or '-'} {c.filesystem or '-'}"
        got = f"{state} {fs_class or '-'} {filesystem or '-'}"
        print(f"{c.name:{width}}  {exp:40}  {got}" + ("" if exp == got else "  <-- differs"))


if __name__ == "__main__":
    main()
