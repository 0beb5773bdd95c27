"""What kind of filesystem a mount is, and which storage it names.

Classes: ``local`` (one host's disks), ``nfs`` (a file server: NFS v3/v4,
SMB/CIFS), ``clustered`` (a shared-disk or distributed cluster filesystem:
GFS2, OCFS2, kernel CephFS), ``parallel`` (IBM Storage Scale/GPFS, WEKA,
Lustre, BeeGFS) and ``fuse`` (a FUSE filesystem, told apart by its subtype:
``fuse.quobyte``, ``fuse.ceph-fuse``, ``fuse.glusterfs`` are shared; others,
such as sshfs, are not assumed to be). Anything not in the table is
``unknown`` and never counted as shared.

The storage key names the shared storage from the mount source (and options)
alone, so two hosts mounting the same filesystem get the same key: an NFS
server and export, a GPFS device name, a CephFS cluster and filesystem.
Some sources name nothing (``ceph-fuse``, ``beegfs_nodev``) and block-device
clusters (GFS2, OCFS2) may see the shared disk under different device names
on each node; for those the key is *weak* and only the domain token a host
reads from the shared directory tells which storage it is.
"""

from __future__ import annotations

import dataclasses
import enum
import posixpath
from typing import Callable


class FsClass(str, enum.Enum):
    LOCAL = "local"
    NFS = "nfs"
    CLUSTERED = "clustered"
    PARALLEL = "parallel"
    FUSE = "fuse"
    UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True)
class FsKind:
    """A filesystem type's class. ``family`` groups types that reach the
    same storage (``ceph`` for the kernel client and ceph-fuse; ``nfs`` for
    nfs and nfs4); ``subtype`` is a FUSE mount's subtype; ``shared`` says
    the filesystem is reachable from several hosts at once."""

    fstype: str
    fs_class: FsClass
    family: str
    shared: bool
    subtype: str | None = None


_LOCAL = {
    "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "jfs", "reiserfs",
    "bcachefs", "vfat", "exfat", "ntfs", "ntfs3", "fuseblk", "tmpfs",
    "ramfs", "overlay", "squashfs", "iso9660", "devtmpfs", "rootfs"}
_SHARED = {
    # type: (class, family)
    "nfs": (FsClass.NFS, "nfs"), "nfs4": (FsClass.NFS, "nfs"),
    "cifs": (FsClass.NFS, "cifs"), "smb3": (FsClass.NFS, "cifs"),
    "gfs2": (FsClass.CLUSTERED, "gfs2"), "ocfs2": (FsClass.CLUSTERED, "ocfs2"),
    "ceph": (FsClass.CLUSTERED, "ceph"),
    "gpfs": (FsClass.PARALLEL, "gpfs"), "wekafs": (FsClass.PARALLEL, "wekafs"),
    "lustre": (FsClass.PARALLEL, "lustre"),
    "beegfs": (FsClass.PARALLEL, "beegfs")}
#: FUSE subtypes of shared filesystems -> family
_FUSE_SHARED = {"quobyte": "quobyte", "ceph-fuse": "ceph",
                "ceph": "ceph", "glusterfs": "glusterfs"}


def classify(fstype: str) -> FsKind:
    """The class of a mountinfo filesystem type (``type[.subtype]``)."""
    if fstype in _LOCAL:
        return FsKind(fstype, FsClass.LOCAL, fstype, False)
    if fstype in _SHARED:
        cls, family = _SHARED[fstype]
        return FsKind(fstype, cls, family, True)
    if fstype == "fuse" or fstype.startswith("fuse."):
        subtype = fstype.partition(".")[2] or None
        shared_family = _FUSE_SHARED.get(subtype or "")
        return FsKind(fstype, FsClass.FUSE, shared_family or fstype,
                      shared_family is not None, subtype)
    return FsKind(fstype, FsClass.UNKNOWN, fstype, False)


@dataclasses.dataclass(frozen=True)
class StorageKey:
    """Which storage a mount source names. ``key`` is None when the source
    does not identify it (a weak key: the domain token must). ``prefix`` is
    the directory inside the storage that the source mounts (an NFS
    export's path), to which the mount's root and the path are appended."""

    key: str | None
    prefix: str = "/"


def _nfs(source: str) -> StorageKey:
    host, sep, export = source.rpartition(":/") if source.startswith("[") \
        else source.partition(":/")
    if not sep or not host:
        return StorageKey(None)
    return StorageKey(host.lower().strip("[]"), "/" + export)


def _cifs(source: str) -> StorageKey:
    parts = source.replace("\\", "/").lstrip("/").split("/")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        return StorageKey(None)
    return StorageKey(f"{parts[0].lower()}/{parts[1]}",
                      "/" + "/".join(parts[2:]))


def _ceph(source: str, fs_name: str | None) -> StorageKey:
    if "@" in source and "=" in source:      # name@fsid.fsname=/path
        ident, _, path = source.partition("@")[2].partition("=")
        return StorageKey(ident, path or "/")
    mons, sep, path = source.rpartition(":/")
    if not sep or not mons:
        return StorageKey(None)
    key = ",".join(sorted(m.strip() for m in mons.split(",")))
    return StorageKey(f"{key}/{fs_name}" if fs_name else key, "/" + path)


def _after_colon(source: str) -> StorageKey:
    """``server:/name/sub`` or ``server:name`` (GlusterFS, Lustre): the
    name identifies the storage, whichever server is asked."""
    _, sep, rest = source.rpartition(":")
    rest = rest.lstrip("/")
    if not sep or not rest:
        return StorageKey(None)
    name, _, sub = rest.partition("/")
    return StorageKey(name, "/" + sub)


def _quobyte(source: str) -> StorageKey:
    rest = source.partition("@")[2] if "@" in source else source
    _, sep, volume = rest.partition("/")
    volume = volume.strip("/")
    if not sep or not volume:
        return StorageKey(None)
    name, _, sub = volume.partition("/")
    return StorageKey(name, "/" + sub)


def storage_key(kind: FsKind, source: str,
                option: Callable[[str], str | None]) -> StorageKey:
    """The storage a shared mount's source names (see the module doc);
    ``option(name)`` looks up a mount or superblock option."""
    family = kind.family
    if not kind.shared:
        return StorageKey(None)
    if family == "nfs":
        return _nfs(source)
    if family == "cifs":
        return _cifs(source)
    if family == "ceph" and kind.fs_class is FsClass.CLUSTERED:
        return _ceph(source, option("mds_namespace") or option("fs"))
    if family in ("glusterfs", "lustre"):
        return _after_colon(source)
    if family == "quobyte":
        return _quobyte(source)
    if family == "gpfs":
        name = source.removeprefix("/dev/")
        return StorageKey(name or None)
    if family == "wekafs":
        name = source.rstrip("/").rpartition("/")[2]
        return StorageKey(name or None)
    if family == "gfs2" and option("locktable"):
        return StorageKey(option("locktable"))
    return StorageKey(None)     # ceph-fuse, beegfs, gfs2/ocfs2 by device


def domain_id(kind: FsKind, key: StorageKey, location: str,
              token: str | None) -> str | None:
    """The storage domain of a directory: family, storage key (or the domain
    token for a weak key) and the directory's place inside the storage
    (``location``: inside the mounted filesystem, see
    ``mountinfo.location``). None when nothing identifies it (a weak key
    and no token)."""
    ident = key.key if key.key is not None else (
        f"token={token}" if token else None)
    if ident is None:
        return None
    where = posixpath.normpath(posixpath.join(key.prefix, location.lstrip("/")))
    return f"{kind.family}:{ident}:{where}"


def filesystem_id(kind: FsKind, key: StorageKey) -> str | None:
    """The filesystem whose capacity a directory uses: family and storage
    key, plus the export for a file server (each export is counted as its
    own filesystem). None for a weak key: only a token names it, and a
    token names a directory, not a filesystem."""
    if key.key is None:
        return None
    export = key.prefix.rstrip("/") if kind.family in ("nfs", "cifs") else ""
    return f"{kind.family}:{key.key}" + (f":{export}" if export else "")
