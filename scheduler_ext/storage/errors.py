"""Errors of the storage tools. Every one names the host and the path it is
about, so an operator with reports from many hosts knows where to look."""

from __future__ import annotations

from scheduler_ext.errors import SchedulerExtError


class StorageError(SchedulerExtError):
    """A storage fact could not be established; ``host`` and ``path`` say
    where (either may be empty when the error is not about one host)."""

    def __init__(self, detail: str, *, host: str = "", path: str = ""):
        where = ", ".join(p for p in (f"host {host}" if host else "",
                                      f"path {path}" if path else "") if p)
        super().__init__(f"{where}: {detail}" if where else detail)
        self.detail = detail
        self.host = host
        self.path = path


class MountinfoError(StorageError):
    """A line of a mount table (mountinfo, fstab) does not parse."""


class PathNotFound(StorageError):
    """The path does not exist (or a component is not a directory)."""


class ProbeTimeout(StorageError):
    """A filesystem call (stat, statfs, a token read) did not return in
    time: the filesystem is hung or unreachable."""


class ReportError(StorageError):
    """A host report is malformed, or reports contradict each other."""


class SyncRefused(StorageError):
    """Applying the storage topology would break placement's accounting
    (shrinking inventory below what is allocated); nothing was written."""
