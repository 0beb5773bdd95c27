"""Host reports built directly, for the topology and sync tests."""

from scheduler_ext.storage.report import HostReport

GiB = 1024 ** 3
T1 = "11111111-1111-4111-8111-111111111111"
T2 = "22222222-2222-4222-8222-222222222222"
GPFS = "gpfs:gpfs1:/pool/instances"
NFS = "nfs:filer01:/export/nova"
GPFS_FS = "gpfs:gpfs1"
NFS_FS = "nfs:filer01"


def shared(host, domain=GPFS, token=T1, seen=None, total_gib=1000,
           free_gib=600, available_gib=590, path="/var/lib/nova/instances",
           filesystem=None):
    """A shared report; its filesystem is the domain without the directory
    unless given."""
    return HostReport(
        host=host, path=path, state="shared", fstype="gpfs", fs_class="parallel",
        family=domain.split(":")[0], domain=domain,
        filesystem=filesystem or domain.rsplit(":", 1)[0], token=token,
        hosts_seen=tuple(seen if seen is not None else [host]),
        total_bytes=total_gib * GiB, free_bytes=free_gib * GiB,
        available_bytes=available_gib * GiB)


def three_hosts():
    """cn1 and cn2 on GPFS, cn3 on NFS (what the functional test uses)."""
    return [shared("cn1", seen=["cn1"]), shared("cn2", seen=["cn1", "cn2"]),
            shared("cn3", NFS, T2, total_gib=500, free_gib=400,
                   available_gib=400)]
