"""A host's storage report: what ``scheduler-ext storage discover`` prints
and ``scheduler-ext storage sync`` reads (JSON, one object per host).

``state`` is one of:

* ``shared``: the path is on a shared filesystem and ``domain`` names it;
* ``local``: the path is on this host's own storage;
* ``lost-mount``: the path should be on a shared filesystem (fstab lists
  one for it, or the operator said so) that is not mounted, so the path
  falls on the filesystem below: never treated as shared;
* ``unconfirmed``: a shared filesystem that the report cannot tie to a
  domain (its source names nothing and there is no domain token, or the
  path's device is not the mount's).

``domain`` names the directory (the filesystem, then the directory inside
it), ``filesystem`` the filesystem whose capacity it uses, as the cluster
names it (see ``identity``); None when only a token names the directory.
Sizes are bytes from statfs; ``problems`` are warnings, each naming the
host and the path.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping

from scheduler_ext.storage.errors import ReportError

FORMAT_VERSION = 1
STATES = ("shared", "local", "lost-mount", "unconfirmed")


@dataclasses.dataclass(frozen=True)
class HostReport:
    """One host's answer for one instances path (see the module doc)."""

    host: str
    path: str
    state: str
    fstype: str = ""
    fs_class: str = ""
    family: str = ""
    mount_point: str = ""
    mount_root: str = ""
    source: str = ""
    device: str = ""
    domain: str | None = None
    filesystem: str | None = None
    token: str | None = None
    hosts_seen: tuple[str, ...] = ()
    total_bytes: int | None = None
    free_bytes: int | None = None
    available_bytes: int | None = None
    lost_mount: str | None = None
    problems: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"host {self.host}, path {self.path}"

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["hosts_seen"] = list(self.hosts_seen)
        out["problems"] = list(self.problems)
        return {"version": FORMAT_VERSION, **out}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


_STR_FIELDS = ("fstype", "fs_class", "family", "mount_point", "mount_root",
               "source", "device")
_OPT_STR = ("domain", "filesystem", "token", "lost_mount")
_OPT_INT = ("total_bytes", "free_bytes", "available_bytes")


def _field(data: Mapping, name: str, kinds: tuple, origin: str) -> Any:
    value = data.get(name)
    if not isinstance(value, kinds) or isinstance(value, bool):
        wanted = " or ".join("null" if k is type(None) else k.__name__
                             for k in kinds)
        raise ReportError(f"{origin}: field {name!r} must be {wanted}, "
                          f"got {value!r}")
    return value


def from_dict(data: Any, origin: str = "report") -> HostReport:
    """A report from its JSON object; ReportError naming ``origin`` (the
    file) and the field when anything is missing or of the wrong type."""
    if not isinstance(data, Mapping):
        raise ReportError(f"{origin}: a report is a JSON object")
    if data.get("version") != FORMAT_VERSION:
        raise ReportError(f"{origin}: version {data.get('version')!r} is not "
                          f"{FORMAT_VERSION}")
    kw: dict[str, Any] = {
        "host": _field(data, "host", (str,), origin),
        "path": _field(data, "path", (str,), origin),
        "state": _field(data, "state", (str,), origin)}
    if kw["state"] not in STATES:
        raise ReportError(f"{origin}: state {kw['state']!r} is not one of "
                          f"{', '.join(STATES)}", host=kw["host"], path=kw["path"])
    for name in _STR_FIELDS:
        kw[name] = _field({name: data.get(name, "")}, name, (str,), origin)
    for name in _OPT_STR:
        kw[name] = _field({name: data.get(name)}, name, (str, type(None)),
                          origin)
    for name in _OPT_INT:
        value = _field(data, name, (int, type(None)), origin)
        if value is not None and value < 0:
            raise ReportError(f"{origin}: field {name!r} is negative")
        kw[name] = value
    for name in ("hosts_seen", "problems"):
        items = _field({name: data.get(name, [])}, name, (list,), origin)
        if not all(isinstance(i, str) for i in items):
            raise ReportError(f"{origin}: field {name!r} must list strings")
        kw[name] = tuple(items)
    report = HostReport(**kw)
    if report.state == "shared" and (report.domain is None or
                                     report.total_bytes is None):
        raise ReportError(f"{origin}: a shared report needs domain and "
                          "total_bytes", host=report.host, path=report.path)
    return report


def loads(text: str, origin: str = "report") -> HostReport:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReportError(f"{origin}: not JSON ({exc})") from None
    return from_dict(data, origin)
