"""A host's report from mountinfo fixtures of every filesystem the issue
names: the class and the domain, and every bad input answered with an
error or warning naming the host and the path, never a wrong "shared"."""

import pytest

from scheduler_ext.storage.errors import PathNotFound, ProbeTimeout, StorageError
from scheduler_ext.storage.probe import DOMAIN_TOKEN, HOST_MARKER
from tests.unit.storage.fakefs import Storage
from tests.unit.storage.hosts import discover, host_with

TOKEN = "{token}"

CASES = [
    # fixture, path, mount point, root in storage, device, class, domain
    ("gpfs_pool_subdir", "/gpfs1/pool/instances", "/gpfs1", "/", (0, 45),
     "parallel", "gpfs:gpfs1:/pool/instances"),
    ("gpfs_bind", "/var/lib/nova/instances", "/var/lib/nova/instances",
     "/pool/instances", (0, 45), "parallel", "gpfs:gpfs1:/pool/instances"),
    ("wekafs", "/mnt/weka/nova", "/mnt/weka", "/", (0, 16625), "parallel",
     "wekafs:default:/nova"),
    ("quobyte", "/var/lib/nova/mnt/quobyte/instances",
     "/var/lib/nova/mnt/quobyte", "/", (0, 52), "fuse",
     "quobyte:nova-volume:/instances"),
    ("gfs2", "/srv/gfs2/instances", "/srv/gfs2", "/", (253, 3), "clustered",
     "gfs2:token={token}:/instances"),
    ("ocfs2", "/srv/ocfs2/instances", "/srv/ocfs2", "/", (8, 33), "clustered",
     "ocfs2:token={token}:/instances"),
    ("ceph", "/var/lib/nova/instances", "/var/lib/nova/instances", "/", (0, 60),
     "clustered", "ceph:10.0.0.1:6789,10.0.0.2:6789,10.0.0.3:6789/cephfs:"
                  "/volumes/_nogroup/nova"),
    ("ceph_new_syntax", "/mnt/cephfs/nova", "/mnt/cephfs", "/", (0, 61),
     "clustered", "ceph:4b5c8c0a-ff60-454b-a1b4-9747aa737d19.cephfs:/nova"),
    ("ceph_fuse", "/mnt/cephfuse/nova", "/mnt/cephfuse", "/", (0, 70), "fuse",
     "ceph:token={token}:/nova"),
    ("nfs", "/var/lib/nova/instances", "/var/lib/nova/instances", "/", (0, 80),
     "nfs", "nfs:filer01.example.net:/export/nova"),
    ("nfs4", "/mnt/nfs4/instances", "/mnt/nfs4", "/", (0, 81), "nfs",
     "nfs:10.0.0.21:/nova/instances"),
    ("glusterfs", "/var/lib/nova/instances", "/var/lib/nova/instances", "/",
     (0, 90), "fuse", "glusterfs:gv-nova:/"),
    ("lustre", "/lustre/nova/instances", "/lustre", "/", (0, 100), "parallel",
     "lustre:scratch:/nova/instances"),
    ("beegfs", "/mnt/beegfs/nova", "/mnt/beegfs", "/", (0, 110), "parallel",
     "beegfs:token={token}:/nova"),
    ("cifs", "/mnt/smb/instances", "/mnt/smb", "/", (0, 120), "nfs",
     "cifs:fileserver.example.net/nova:/instances"),
    ("escaped", "/mnt/nova shared/instances", "/mnt/nova shared", "/", (0, 130),
     "nfs", "nfs:filer02:/export/with space\\dir/instances"),
    ("stacked", "/var/lib/nova/instances", "/var/lib/nova/instances", "/",
     (0, 140), "nfs", "nfs:filer03:/nova"),
]


def _storage_for(path, mount_point, root):
    inner = root.rstrip("/") + path[len(mount_point):]
    return Storage(dirs=[inner or "/"])


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fixture_gives_class_and_domain(case):
    name, path, mount_point, root, dev, cls, domain = case
    fake = host_with(mount_point, _storage_for(path, mount_point, root), dev, root)
    report = discover(fake, name, path)
    assert (report.state, report.fs_class) == ("shared", cls), report.problems
    assert report.domain == domain.format(token=report.token)
    assert report.hosts_seen == ("cn1",)
    assert report.total_bytes == 1000 * 1024 ** 3


def test_local_path_is_local_even_below_a_cluster_mount_point_name():
    report = discover(host_with("", None, None), "gpfs_pool_subdir",
                      "/var/lib/nova/instances")
    assert (report.state, report.fs_class, report.domain) == ("local", "local", None)
    assert report.mount_point == "/var/lib/nova"


def test_symlinked_instances_path_resolves_to_the_cluster_mount():
    fake = host_with("/gpfs1", Storage(dirs=["/pool/instances"]), (0, 45),
                     symlinks={"/var/lib/nova/instances": "/gpfs1/pool/instances"})
    report = discover(fake, "gpfs_pool_subdir", "/var/lib/nova/instances")
    assert report.domain == "gpfs:gpfs1:/pool/instances"


@pytest.mark.parametrize("on_root_fs", [True, False])
def test_missing_gpfs_mount_is_a_lost_mount_never_shared(on_root_fs):
    fake = host_with("", None, None)
    if on_root_fs:   # nova re-created the directory on the root filesystem
        fake.mounts["/"][0].mkdirs("/gpfs1/pool/instances")
    report = discover(fake, "gpfs_missing", "/gpfs1/pool/instances",
                      fstab="gpfs.fstab")
    assert report.state == "lost-mount" and report.domain is None
    assert report.lost_mount == "/gpfs1"
    assert "host cn1, path /gpfs1/pool/instances" in report.problems[0]
    assert "gpfs /dev/gpfs1 belongs on /gpfs1" in report.problems[0]


def test_expected_shared_path_on_local_storage_is_a_lost_mount():
    report = discover(host_with("", None, None), "local",
                      "/var/lib/nova/instances", expect_shared=True)
    assert report.state == "lost-mount"
    assert "expected on shared storage but on xfs" in report.problems[0]


def test_a_line_that_does_not_parse_names_host_and_line():
    with pytest.raises(StorageError) as exc:
        discover(host_with("", None, None), "broken", "/tmp")
    assert str(exc.value).startswith(
        "host cn1, path /tmp: broken line 2: no ' - ' separator")


def test_a_path_that_does_not_exist_names_host_and_path():
    with pytest.raises(PathNotFound) as exc:
        discover(host_with("", None, None), "local", "/var/lib/nova/nope")
    assert str(exc.value).startswith("host cn1, path /var/lib/nova/nope:")


def test_a_path_that_is_a_file_is_refused():
    fake = host_with("", None, None)
    fake.mounts["/var/lib/nova"][0].files["/instances.img"] = "x"
    with pytest.raises(PathNotFound, match="not a directory"):
        discover(fake, "local", "/var/lib/nova/instances.img")


@pytest.mark.parametrize("call", ["statvfs", "stat", "read"])
def test_a_hung_filesystem_call_is_time_boxed(call):
    fake = host_with("/gpfs1", Storage(dirs=["/pool/instances"]), (0, 45),
                     hang=[call])
    try:
        with pytest.raises(ProbeTimeout) as exc:
            discover(fake, "gpfs_pool_subdir", "/gpfs1/pool/instances",
                     timeout=0.2)
    finally:
        fake.release.set()
    assert exc.value.host == "cn1"
    assert "did not answer within 0.2 s" in str(exc.value)
    assert "/gpfs1/pool/instances" in exc.value.path


def test_device_disagreeing_with_the_mount_is_never_shared():
    fake = host_with("/var/lib/nova/instances", Storage(), (0, 99))
    report = discover(fake, "nfs", "/var/lib/nova/instances")
    assert (report.state, report.domain) == ("unconfirmed", None)
    assert "device 0:99 is not the device 0:80" in report.problems[0]


def test_read_only_writes_nothing_and_a_weak_key_stays_unconfirmed():
    storage = Storage(dirs=["/instances"])
    report = discover(host_with("/srv/gfs2", storage, (253, 3)), "gfs2",
                      "/srv/gfs2/instances", write_token=False)
    assert report.state == "unconfirmed" and storage.files == {}
    assert "does not name its storage" in report.problems[0]
    nfs = Storage()
    report = discover(host_with("/var/lib/nova/instances", nfs, (0, 80)), "nfs",
                      "/var/lib/nova/instances", write_token=False)
    assert report.state == "shared" and report.token is None and nfs.files == {}
    assert "no domain token" in report.problems[0]


def test_two_hosts_on_one_storage_read_one_token_and_see_each_other():
    gpfs = Storage(dirs=["/pool/instances"])
    a = host_with("/gpfs1", gpfs, (0, 45))
    b = host_with("/var/lib/nova/instances", gpfs, (0, 45), root="/pool/instances")
    first = discover(a, "gpfs_pool_subdir", "/gpfs1/pool/instances", host="cn1")
    second = discover(b, "gpfs_bind", "/var/lib/nova/instances", host="cn2")
    assert first.token == second.token and first.domain == second.domain
    assert first.hosts_seen == ("cn1",) and second.hosts_seen == ("cn1", "cn2")
    assert set(gpfs.files) == {f"/pool/instances/{DOMAIN_TOKEN}",
                               f"/pool/instances/{HOST_MARKER}cn1",
                               f"/pool/instances/{HOST_MARKER}cn2"}
    again = discover(a, "gpfs_pool_subdir", "/gpfs1/pool/instances", host="cn1")
    assert again.token == first.token and again.hosts_seen == ("cn1", "cn2")


def test_a_token_that_is_not_a_uuid_is_an_error_naming_the_file():
    gpfs = Storage(dirs=["/pool/instances"])
    gpfs.files[f"/pool/instances/{DOMAIN_TOKEN}"] = "garbage\n"
    with pytest.raises(StorageError, match=f"path /gpfs1/pool/instances/"
                                           f"{DOMAIN_TOKEN}: domain token"):
        discover(host_with("/gpfs1", gpfs, (0, 45)), "gpfs_pool_subdir",
                 "/gpfs1/pool/instances")


def test_a_relative_path_and_a_bad_host_name_are_refused():
    with pytest.raises(StorageError, match="must be absolute"):
        discover(host_with("", None, None), "local", "var/lib")
    with pytest.raises(StorageError, match="not a valid host name"):
        discover(host_with("", None, None), "local", "/tmp", host="bad host")
