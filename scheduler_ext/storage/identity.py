"""What the cluster says a filesystem is, so that every host names one
filesystem the same way whatever source string it mounted it from.

The mount source alone is not an identity: an NFS server mounted by name on
one host and by address on another, a CephFS mounted with the old
``mon1,mon2:/path`` syntax and the new ``name@fsid.fs=/path`` one, or a GPFS
device name (unique only inside its cluster) would each count one
filesystem twice. ``ClusterFacts`` asks the system:

* GPFS / IBM Storage Scale: the cluster id (``mmlscluster -Y``), so the
  identity is ``<cluster id>/<device>``;
* CephFS: the cluster's fsid (``/etc/ceph/<cluster>.conf``), so both mount
  syntaxes give ``<fsid>.<fs name>``;
* NFS and SMB: the server's addresses (DNS, both ways), so a name and its
  address give the same smallest address;
* GFS2 without a lock table, OCFS2: the filesystem UUID of the block device
  (``/dev/disk/by-uuid``), the same on every node sharing the disk.

Lustre (the fsname), WekaFS, Quobyte and GlusterFS (the volume name) are
named by their source already. A fact that cannot be read leaves the
source's own key, with a note in the report.
"""

from __future__ import annotations

import configparser
import ipaddress
import os
import socket
import subprocess
from typing import Protocol

from scheduler_ext.storage.filesystems import FsKind, StorageKey

MMLSCLUSTER = "/usr/lpp/mmfs/bin/mmlscluster"


class ClusterFacts(Protocol):
    """Facts about a mounted filesystem; None when unknown. Calls may
    block (DNS, a hung cluster daemon): the caller time-boxes them."""

    def gpfs_cluster_id(self) -> str | None: ...

    def ceph_fsid(self, cluster: str) -> str | None: ...

    def server_addresses(self, server: str) -> tuple[str, ...]: ...

    def device_uuid(self, device: str) -> str | None: ...


class NoFacts:
    """Knows nothing: every key stays the source's own."""

    def gpfs_cluster_id(self) -> str | None:
        return None

    def ceph_fsid(self, cluster: str) -> str | None:
        return None

    def server_addresses(self, server: str) -> tuple[str, ...]:
        return ()

    def device_uuid(self, device: str) -> str | None:
        return None


def parse_mmlscluster(text: str) -> str | None:
    """The clusterId of ``mmlscluster -Y`` output (colon-separated rows,
    named by the ``HEADER`` row of the ``clusterSummary`` section)."""
    header: list[str] | None = None
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) < 3 or fields[1] != "clusterSummary":
            continue
        if fields[2] == "HEADER":
            header = fields
        elif header is not None and "clusterId" in header:
            value = fields[header.index("clusterId")] \
                if len(fields) > header.index("clusterId") else ""
            return value or None
    return None


def parse_ceph_conf(text: str) -> str | None:
    """``fsid`` of the ``[global]`` section of a ceph.conf."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    for section in ("global",):
        if parser.has_section(section):
            for key in ("fsid", "fs id", "fs_id"):
                if parser.has_option(section, key):
                    return parser.get(section, key).strip().lower() or None
    return None


class SystemFacts:
    """The facts of this host (read-only commands and files)."""

    def __init__(self, etc_ceph: str = "/etc/ceph",
                 by_uuid: str = "/dev/disk/by-uuid"):
        self.etc_ceph = etc_ceph
        self.by_uuid = by_uuid

    def gpfs_cluster_id(self) -> str | None:
        try:
            out = subprocess.run([MMLSCLUSTER, "-Y"], capture_output=True,
                                 text=True, check=False).stdout
        except OSError:
            return None
        return parse_mmlscluster(out)

    def ceph_fsid(self, cluster: str) -> str | None:
        try:
            with open(os.path.join(self.etc_ceph, f"{cluster}.conf"),
                      encoding="utf-8") as f:
                return parse_ceph_conf(f.read())
        except OSError:
            return None

    def server_addresses(self, server: str) -> tuple[str, ...]:
        names = {server}
        try:
            ipaddress.ip_address(server)
            names.add(socket.gethostbyaddr(server)[0])
        except (ValueError, OSError):
            pass
        found: set[str] = set()
        for name in names:
            try:
                found |= {str(info[4][0]) for info in socket.getaddrinfo(
                    name, None, proto=socket.IPPROTO_TCP)}
            except OSError:
                continue
        return tuple(sorted(found))

    def device_uuid(self, device: str) -> str | None:
        try:
            real = os.path.realpath(device)
            for name in os.listdir(self.by_uuid):
                if os.path.realpath(os.path.join(self.by_uuid, name)) == real:
                    return name.lower()
        except OSError:
            return None
        return None


def smallest_address(addresses: tuple[str, ...]) -> str | None:
    """The smallest address (IPv4 before IPv6, then numerically)."""
    parsed = []
    for a in addresses:
        try:
            parsed.append(ipaddress.ip_address(a.split("%")[0]))
        except ValueError:
            continue
    if not parsed:
        return None
    return str(min(parsed, key=lambda ip: (ip.version, ip)))


def resolve(kind: FsKind, source: str, key: StorageKey, option,
            facts: ClusterFacts) -> tuple[StorageKey, str]:
    """``key`` named by what the cluster says (see the module doc), and a
    note ("" when the identity is confirmed or needs no facts)."""
    family = kind.family
    if family == "gpfs" and key.key:
        cluster = facts.gpfs_cluster_id()
        if cluster:
            return StorageKey(f"{cluster}/{key.key}", key.prefix), ""
        return key, (f"GPFS cluster id not read ({MMLSCLUSTER} -Y); the "
                     f"device name {key.key} alone names the filesystem")
    if family in ("nfs", "cifs") and key.key:
        server, _, share = key.key.partition("/")
        address = smallest_address(facts.server_addresses(server))
        if address:
            ident = address + (f"/{share}" if share else "")
            return StorageKey(ident, key.prefix), ""
        return key, (f"server {server} not resolved; hosts must mount it by "
                     "the same name")
    if family == "ceph" and kind.fs_class.value == "clustered" and key.key \
            and "@" not in source:
        fs_name = option("mds_namespace") or option("fs") or "cephfs"
        fsid = facts.ceph_fsid(option("cluster") or "ceph")
        if fsid:
            return StorageKey(f"{fsid}.{fs_name}", key.prefix), ""
        return key, ("ceph fsid not read (/etc/ceph/ceph.conf); the monitor "
                     "addresses name the filesystem")
    if family in ("gfs2", "ocfs2") and key.key is None:
        uuid = facts.device_uuid(source)
        if uuid:
            return StorageKey(f"uuid={uuid}", key.prefix), ""
    return key, ""
