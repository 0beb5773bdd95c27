"""Filesystem classes and the storage a mount source names."""

import pytest

from scheduler_ext.storage import filesystems as fs
from scheduler_ext.storage.filesystems import FsClass


@pytest.mark.parametrize("fstype, cls, family, shared, subtype", [
    ("gpfs", FsClass.PARALLEL, "gpfs", True, None),
    ("wekafs", FsClass.PARALLEL, "wekafs", True, None),
    ("lustre", FsClass.PARALLEL, "lustre", True, None),
    ("beegfs", FsClass.PARALLEL, "beegfs", True, None),
    ("gfs2", FsClass.CLUSTERED, "gfs2", True, None),
    ("ocfs2", FsClass.CLUSTERED, "ocfs2", True, None),
    ("ceph", FsClass.CLUSTERED, "ceph", True, None),
    ("nfs", FsClass.NFS, "nfs", True, None),
    ("nfs4", FsClass.NFS, "nfs", True, None),
    ("cifs", FsClass.NFS, "cifs", True, None),
    ("fuse.quobyte", FsClass.FUSE, "quobyte", True, "quobyte"),
    ("fuse.ceph-fuse", FsClass.FUSE, "ceph", True, "ceph-fuse"),
    ("fuse.glusterfs", FsClass.FUSE, "glusterfs", True, "glusterfs"),
    ("fuse.sshfs", FsClass.FUSE, "fuse.sshfs", False, "sshfs"),
    ("fuse", FsClass.FUSE, "fuse", False, None),
    ("ext4", FsClass.LOCAL, "ext4", False, None),
    ("xfs", FsClass.LOCAL, "xfs", False, None),
    ("btrfs", FsClass.LOCAL, "btrfs", False, None),
    ("zfs", FsClass.LOCAL, "zfs", False, None),
    ("tmpfs", FsClass.LOCAL, "tmpfs", False, None),
    ("fuseblk", FsClass.LOCAL, "fuseblk", False, None),
    ("somethingnew", FsClass.UNKNOWN, "somethingnew", False, None),
])
def test_classify(fstype, cls, family, shared, subtype):
    kind = fs.classify(fstype)
    assert (kind.fs_class, kind.family, kind.shared, kind.subtype) == \
        (cls, family, shared, subtype)


def key(fstype, source, **options):
    return fs.storage_key(fs.classify(fstype), source, options.get)


@pytest.mark.parametrize("fstype, source, options, expected", [
    ("nfs", "Filer01:/export/nova", {}, ("filer01", "/export/nova")),
    ("nfs4", "[fd00::21]:/nova", {}, ("fd00::21", "/nova")),
    ("nfs4", "nocolon", {}, (None, "/")),
    ("cifs", "//Server/share/sub", {}, ("server/share", "/sub")),
    ("ceph", "m2:6789,m1:6789:/vol", {"mds_namespace": "cephfs"},
     ("m1:6789,m2:6789/cephfs", "/vol")),
    ("ceph", "nova@fsid.cephfs=/volumes/a", {}, ("fsid.cephfs", "/volumes/a")),
    ("fuse.ceph-fuse", "ceph-fuse", {}, (None, "/")),
    ("lustre", "10.1.0.1@o2ib:10.1.0.2@o2ib:/scratch/sub", {}, ("scratch", "/sub")),
    ("fuse.glusterfs", "gluster1:/gv0", {}, ("gv0", "/")),
    ("fuse.quobyte", "quobyte@reg:7861/vol/sub", {}, ("vol", "/sub")),
    ("fuse.quobyte", "quobyte", {}, (None, "/")),
    ("gpfs", "/dev/gpfs1", {}, ("gpfs1", "/")),
    ("wekafs", "backend-0/default", {}, ("default", "/")),
    ("wekafs", "default", {}, ("default", "/")),
    ("gfs2", "/dev/mapper/vg-lv", {}, (None, "/")),
    ("gfs2", "/dev/mapper/vg-lv", {"locktable": "hci:nova"}, ("hci:nova", "/")),
    ("ocfs2", "/dev/sdc1", {}, (None, "/")),
    ("beegfs", "beegfs_nodev", {}, (None, "/")),
    ("ext4", "/dev/vda1", {}, (None, "/")),
])
def test_storage_key(fstype, source, options, expected):
    got = key(fstype, source, **options)
    assert (got.key, got.prefix) == expected


def test_domain_joins_prefix_and_location_and_uses_the_token_for_a_weak_key():
    kind = fs.classify("nfs4")
    # one export mounted at two depths names one directory
    a = fs.domain_id(kind, fs.StorageKey("filer", "/srv"), "/nova/instances", None)
    b = fs.domain_id(kind, fs.StorageKey("filer", "/srv/nova"), "/instances", None)
    assert a == b == "nfs:filer:/srv/nova/instances"
    weak = fs.classify("fuse.ceph-fuse")
    assert fs.domain_id(weak, fs.StorageKey(None), "/x", None) is None
    assert fs.domain_id(weak, fs.StorageKey(None), "/x", "t1") == "ceph:token=t1:/x"
