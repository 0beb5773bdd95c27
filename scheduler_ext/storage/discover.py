"""One host's report on an instances path: which mount holds it, what kind
of filesystem that is, which storage domain, how big, and which other hosts
wrote into the same directory.

The answer is ``shared`` only when every check agrees: the path resolves to
a mount of a shared filesystem class, the path's own device number is that
mount's, and the storage is named (by what its cluster says it is, by its
mount source, or for a source that names nothing, by the domain token).

It is ``local`` only with evidence: a known local filesystem type, nothing
expected above the path and nothing hidden under it. Otherwise:

* ``lost-mount``: fstab (or the operator) puts a shared filesystem or a
  bind mount above the path that is not mounted (a mount point written
  ``/gpfs1/`` is ``/gpfs1``), or puts one at the holder's own mount point
  of another kind (a tmpfs, an untriggered autofs), or a shared filesystem
  over the path is hidden by a later mount (an overmount);
* ``unconfirmed``: an untriggered autofs mount point fstab says nothing
  about, a filesystem type known as neither local nor shared
  (``fuse.juicefs``, ``vxfs``, ``sshfs``), or a device that disagrees.
"""

from __future__ import annotations

import dataclasses
import posixpath

from scheduler_ext.storage import filesystems, identity, mountinfo
from scheduler_ext.storage.errors import (
    MountinfoError, PathNotFound, StorageError)
from scheduler_ext.storage.probe import Probe
from scheduler_ext.storage.report import HostReport


@dataclasses.dataclass(frozen=True)
class Tables:
    """The mount tables a report is built from (text as read)."""

    mountinfo: str
    fstab: str = ""
    mountinfo_name: str = "/proc/self/mountinfo"
    fstab_name: str = "/etc/fstab"


def lost_mount(path: str, holder: mountinfo.MountEntry | None,
               fstab: list[mountinfo.FstabEntry]) -> mountinfo.FstabEntry | None:
    """The fstab entry above ``path`` that is not what holds it: a shared
    filesystem or a bind mount whose mount point covers the path and is
    longer than the holder's, or a shared filesystem at the holder's own
    mount point when the holder is of another family (a tmpfs or an
    untriggered autofs where fstab puts GPFS or NFS)."""
    held_at = holder.mount_point if holder else ""
    held_family = filesystems.classify(holder.fstype).family if holder else ""
    best = None
    for entry in fstab:
        kind = filesystems.classify(entry.fstype)
        if not (kind.shared or entry.is_bind) or \
                not mountinfo.covers(entry.mount_point, path):
            continue
        longer = len(entry.mount_point) > len(held_at)
        replaced = entry.mount_point == held_at and not entry.is_bind and \
            kind.family != held_family
        if (longer or replaced) and \
                (best is None or len(entry.mount_point) > len(best.mount_point)):
            best = entry
    return best


def hidden_shared(path: str, holder: mountinfo.MountEntry,
                  entries: list[mountinfo.MountEntry]) -> mountinfo.MountEntry | None:
    """A shared filesystem mounted at or below the holder's mount point and
    over ``path``, but hidden by a later mount (an overmount): the path
    should be on it."""
    seen = {e.mount_id for e in mountinfo.visible(entries)}
    for e in entries:
        if e.mount_id in seen or not filesystems.classify(e.fstype).shared:
            continue
        if mountinfo.covers(e.mount_point, path) and \
                len(e.mount_point) >= len(holder.mount_point):
            return e
    return None


def _lost(probe: Probe, path: str, where: str, problem: str) -> HostReport:
    return HostReport(probe.host, path, "lost-mount", lost_mount=where,
                      problems=(f"host {probe.host}, path {path}: {problem}",))


def discover(probe: Probe, path: str, tables: Tables, *,
             expect_shared: bool = False, write_token: bool = True,
             facts: identity.ClusterFacts | None = None) -> HostReport:
    """The report for ``path`` on ``probe.host``. Raises StorageError
    subclasses (naming host and path) for a mount table that does not
    parse, a path that does not exist and a call that hangs."""
    host = probe.host
    if not path.startswith("/"):
        raise StorageError("the instances path must be absolute", host=host,
                           path=path)
    try:
        entries = mountinfo.parse(tables.mountinfo, host=host,
                                  source=tables.mountinfo_name)
        fstab = mountinfo.parse_fstab(tables.fstab, host=host,
                                      source=tables.fstab_name)
    except MountinfoError as exc:   # say which path was being resolved
        raise MountinfoError(exc.detail, host=host, path=path) from None
    real = posixpath.normpath(probe.realpath(path))
    holder = mountinfo.resolve(real, entries)
    missing = lost_mount(real, holder, fstab)
    if missing is not None:
        return _lost(probe, path, missing.mount_point,
                     f"{missing.fstype} {missing.source} belongs on "
                     f"{missing.mount_point} ({tables.fstab_name} line "
                     f"{missing.line}) but is not mounted; the path falls on "
                     f"{holder.mount_point if holder else 'nothing'}")
    if holder is None:
        raise StorageError(f"no mount in {tables.mountinfo_name} holds "
                           f"{real}", host=host, path=path)
    kind = filesystems.classify(holder.fstype)
    hidden = None if kind.shared else hidden_shared(real, holder, entries)
    if hidden is not None:
        return _lost(probe, path, hidden.mount_point,
                     f"{holder.fstype} {holder.source} mounted on "
                     f"{holder.mount_point} hides the {hidden.fstype} "
                     f"{hidden.source} mounted on {hidden.mount_point} "
                     f"({tables.mountinfo_name} line {hidden.line})")
    if holder.fstype == "autofs":
        return HostReport(host, path, "unconfirmed", fstype="autofs",
                          mount_point=holder.mount_point, problems=(
            f"host {host}, path {path}: an autofs mount point at "
            f"{holder.mount_point} that has not been triggered; the "
            "filesystem behind it is not mounted (access the path, then "
            "discover again)",))
    device = probe.device(real)
    if expect_shared and not kind.shared:
        return _lost(probe, path, "",
                     f"expected on shared storage but on {holder.fstype} "
                     f"{holder.source} mounted at {holder.mount_point}")
    return _describe(probe, path, real, holder, kind, device, write_token,
                     facts or identity.NoFacts())


def _describe(probe: Probe, path: str, real: str, holder: mountinfo.MountEntry,
              kind: filesystems.FsKind, device: tuple[int, int],
              write_token: bool, facts: identity.ClusterFacts) -> HostReport:
    where = f"host {probe.host}, path {path}"
    size = probe.size(real)
    report = HostReport(
        host=probe.host, path=path, state="local", fstype=holder.fstype,
        fs_class=kind.fs_class.value, family=kind.family,
        mount_point=holder.mount_point, mount_root=holder.root,
        source=holder.source, device=f"{holder.major}:{holder.minor}",
        total_bytes=size.total, free_bytes=size.free,
        available_bytes=size.available)
    if device != holder.device:
        problem = (f"{where}: the path's device {device[0]}:{device[1]} is "
                   f"not the device {holder.major}:{holder.minor} of the mount "
                   f"at {holder.mount_point} ({holder.fstype}); the mount "
                   "table and the path disagree")
        return dataclasses.replace(
            report, state="unconfirmed" if kind.shared else "local",
            problems=(problem,))
    if kind.fs_class is not filesystems.FsClass.LOCAL and not kind.shared:
        return dataclasses.replace(report, state="unconfirmed", problems=(
            f"{where}: filesystem type {holder.fstype} ({holder.source} on "
            f"{holder.mount_point}) is not known to be local or shared; "
            "never counted as either",))
    if not kind.shared:
        return report
    token = probe.ensure_token(real) if write_token else probe.read_token(real)
    seen = probe.hosts_seen(real, token) if token else ()
    key = filesystems.storage_key(kind, holder.source, holder.option)
    key, note = probe.call(
        "read the filesystem's identity", real,
        lambda: identity.resolve(kind, holder.source, key, holder.option, facts))
    domain = filesystems.domain_id(kind, key, mountinfo.location(holder, real),
                                   token)
    if domain is None:
        return dataclasses.replace(report, state="unconfirmed", problems=(
            f"{where}: {holder.fstype} source {holder.source!r} does not name "
            "its storage and there is no domain token; run discover without "
            "--read-only",))
    problems = (() if token else (
        f"{where}: no domain token; other hosts cannot confirm they share "
        "this directory (run discover without --read-only)",)) + \
        ((f"{where}: {note}",) if note else ())
    return dataclasses.replace(
        report, state="shared", domain=domain,
        filesystem=filesystems.filesystem_id(kind, key), token=token,
        hosts_seen=seen, problems=problems)


def read_tables(probe: Probe, mountinfo_file: str = "/proc/self/mountinfo",
                fstab_file: str | None = "/etc/fstab") -> Tables:
    """Read the mount tables (time-boxed like every other call); a missing
    fstab is an empty one."""
    text = probe.call("read", mountinfo_file,
                      lambda: probe.ops.read_text(mountinfo_file))
    fstab = ""
    if fstab_file:
        try:
            fstab = probe.call("read", fstab_file,
                               lambda: probe.ops.read_text(fstab_file))
        except PathNotFound:
            fstab = ""
    return Tables(text, fstab, mountinfo_file, fstab_file or "")
