"""From several hosts' reports to sharing providers: one per filesystem.

A domain (one directory) has as members the hosts whose ``shared`` reports
name it. Domains on one filesystem (as the cluster names it, the reports'
``filesystem``) share its capacity, so they share one provider: several
instance directories on one GPFS are one provider, with a warning naming
them. A report without a filesystem (only a token names the directory)
is a filesystem of its own. Reports
are grouped by the domain token they read (the proof that the hosts see one
directory) and, without a token, by the domain name. Contradictions are
errors naming the hosts and paths, never a guess:

* one domain name, different tokens: two storages with one name, or a token
  copied between hosts;
* one token, two storage names: the same directory reached through
  different sources (an NFS server by name and by address); mount it the
  same way everywhere;
* two members where neither sees the other's marker;
* sizes that differ by more than the tolerance;
* two reports for one host.

A member without a token in a domain of several hosts cannot be confirmed
and is left out with a warning; so are ``lost-mount`` and ``unconfirmed``
reports.

Inventory: ``DISK_GB`` total is the filesystem size in whole GiB (the
smallest reported), reserved the root-only reserve rounded up plus
``reserved_disk_gb``; ``max_unit`` is the total, as nova reports disk.
The provider and aggregate UUIDs are UUIDv5 of the filesystem's name, so
every run, on any host, names them the same.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import uuid as uuidlib
from typing import Iterable

from scheduler_ext.placement.model import Inventory
from scheduler_ext.storage.errors import ReportError
from scheduler_ext.storage.report import HostReport

GiB = 1024 ** 3
#: namespace of the UUIDv5 names of sharing providers and their aggregates
NAMESPACE = uuidlib.UUID("5d0ab8f6-1c3e-4c8e-9a51-6f1f3b2c7e40")
MAX_NAME = 200


@dataclasses.dataclass(frozen=True)
class SharingProviderSpec:
    """What placement should hold for one filesystem."""

    filesystem: str
    domains: tuple[str, ...]          # its instance directories, sorted
    uuid: str
    name: str
    aggregate: str
    inventory: Inventory
    members: tuple[str, ...]          # compute node (host) names, sorted
    paths: tuple[tuple[str, str], ...]  # (host, instances path)


@dataclasses.dataclass(frozen=True)
class Topology:
    """``states``: (host, state, path) of every report, sorted by host."""

    providers: tuple[SharingProviderSpec, ...]
    warnings: tuple[str, ...]
    states: tuple[tuple[str, str, str], ...] = ()


NAME_PREFIX = "shared-storage:"


def provider_uuid(filesystem: str) -> str:
    return str(uuidlib.uuid5(NAMESPACE, "sharing-provider:" + filesystem))


def aggregate_uuid(filesystem: str) -> str:
    return str(uuidlib.uuid5(NAMESPACE, "aggregate:" + filesystem))


def provider_name(filesystem: str) -> str:
    """``shared-storage:<filesystem>``, shortened with a UUID fragment to fit
    placement's 200 characters."""
    name = f"{NAME_PREFIX}{filesystem}"
    if len(name) <= MAX_NAME:
        return name
    return f"{name[:MAX_NAME - 9]}~{provider_uuid(filesystem)[:8]}"


def filesystem_of(group: list[HostReport], warnings: list[str]) -> str:
    """The filesystem of a confirmed directory group: the one its reports
    name (the smallest if they disagree, with a warning), else the domain."""
    names = sorted({r.filesystem for r in group if r.filesystem})
    if len(names) > 1:
        warnings.append(
            f"{group[0].domain}: its hosts name its filesystem differently "
            f"({'; '.join(f'{r.where} as {r.filesystem}' for r in group)}); "
            f"using {names[0]}")
    if names:
        return names[0]
    assert group[0].domain is not None
    return group[0].domain


def _check_hosts(reports: list[HostReport]) -> None:
    seen: dict[str, HostReport] = {}
    for r in reports:
        if r.host in seen:
            raise ReportError(
                f"two reports for host {r.host}: paths {seen[r.host].path} "
                f"and {r.path}; give one report per host", host=r.host)
        seen[r.host] = r


def _group(reports: list[HostReport], warnings: list[str]) -> list[list[HostReport]]:
    """Confirmed groups of shared reports (see the module doc)."""
    by_token: dict[str, list[HostReport]] = {}
    untokened: dict[str, list[HostReport]] = {}
    for r in reports:
        if r.state != "shared":
            if r.state != "local":
                warnings.append(f"{r.where}: {r.state}, left out"
                                + (f" ({r.problems[0]})" if r.problems else ""))
            continue
        assert r.domain is not None
        if r.token:
            by_token.setdefault(r.token, []).append(r)
        else:
            untokened.setdefault(r.domain, []).append(r)
    groups = list(by_token.values())
    for domain, members in untokened.items():
        tokened = [g for g in groups if g[0].domain == domain]
        if tokened or len(members) > 1:
            for r in members:
                warnings.append(f"{r.where}: no domain token, so it cannot be "
                                f"confirmed as a member of {domain}; left out")
            continue
        warnings.append(f"{members[0].where}: {domain} has one member and no "
                        "domain token")
        groups.append(members)
    return groups


def _check_group(group: list[HostReport], tolerance: float,
                 same_directory: bool = True) -> None:
    names = {r.domain for r in group}
    if same_directory and len(names) > 1:
        listing = "; ".join(f"{r.where} as {r.domain}" for r in group)
        raise ReportError(
            f"one shared directory (domain token {group[0].token}) is reached "
            f"as different storages: {listing}; mount it from the same source "
            "on every host")
    for a, b in itertools.combinations(group, 2):
        if same_directory and a.token and a.host not in b.hosts_seen and b.host not in a.hosts_seen:
            raise ReportError(
                f"{a.where} and {b.where} read domain token {a.token} but "
                "neither sees the other's host marker: the token was copied, "
                "or they are not the same directory")
        big, small = max(a.total_bytes or 0, b.total_bytes or 0), \
            min(a.total_bytes or 0, b.total_bytes or 0)
        if big and (big - small) / big > tolerance:
            raise ReportError(
                f"{a.where} reports {a.total_bytes} bytes and {b.where} "
                f"{b.total_bytes} bytes for {a.domain}: sizes differ by more "
                f"than {tolerance:.1%}")


def _check_names(groups: list[list[HostReport]]) -> None:
    first: dict[str, HostReport] = {}
    for group in groups:
        r = group[0]
        assert r.domain is not None
        other = first.setdefault(r.domain, r)
        if other is not r:
            raise ReportError(
                f"{other.where} and {r.where} name the same storage "
                f"{r.domain} but read different domain tokens ({other.token}, "
                f"{r.token}): two storages with one name, or a token copied "
                "between hosts")


def _spec(filesystem: str, groups: list[list[HostReport]], reserved_gb: int,
          ratio: float) -> SharingProviderSpec:
    reports = [r for g in groups for r in g]
    total = min(r.total_bytes or 0 for r in reports) // GiB
    reserve = max(math.ceil(max(0, (r.free_bytes or 0) - (r.available_bytes or 0))
                            / GiB) for r in reports)
    inventory = Inventory(total=max(total, 1),
                          reserved=min(max(total, 1), reserve + reserved_gb),
                          max_unit=max(total, 1), allocation_ratio=ratio)
    members = sorted(reports, key=lambda r: r.host)
    return SharingProviderSpec(
        filesystem, tuple(sorted({str(r.domain) for r in reports})),
        provider_uuid(filesystem), provider_name(filesystem),
        aggregate_uuid(filesystem), inventory, tuple(r.host for r in members),
        tuple((r.host, r.path) for r in members))


def build(reports: Iterable[HostReport], *, reserved_disk_gb: int = 0,
          allocation_ratio: float = 1.0,
          size_tolerance: float = 0.01) -> Topology:
    """One sharing provider per filesystem of the confirmed storage domains
    (sorted by filesystem); ReportError on contradictory reports."""
    reports = list(reports)
    if reserved_disk_gb < 0 or allocation_ratio <= 0 or size_tolerance < 0:
        raise ReportError("reserved_disk_gb must be >= 0, allocation_ratio > 0 "
                          "and size_tolerance >= 0")
    _check_hosts(reports)
    warnings: list[str] = []
    groups = _group(reports, warnings)
    for group in groups:
        _check_group(group, size_tolerance)
    _check_names(groups)
    for group in groups:
        if (min(r.total_bytes or 0 for r in group)) < GiB:
            raise ReportError(f"{group[0].where}: {group[0].domain} is smaller "
                              "than 1 GiB; not a place for instance disks")
    by_fs: dict[str, list[list[HostReport]]] = {}
    for group in groups:
        by_fs.setdefault(filesystem_of(group, warnings), []).append(group)
    for filesystem, on_it in sorted(by_fs.items()):
        _check_group([r for g in on_it for r in g], size_tolerance,
                     same_directory=False)
        if len(on_it) > 1:
            warnings.append(
                f"{filesystem}: {len(on_it)} instance directories on one "
                "filesystem share its capacity, so one provider: "
                + "; ".join(f"{g[0].domain} (hosts "
                            f"{', '.join(sorted(r.host for r in g))})"
                            for g in on_it))
    specs = [_spec(fs, on_it, reserved_disk_gb, allocation_ratio)
             for fs, on_it in sorted(by_fs.items())]
    states = tuple(sorted((r.host, r.state, r.path) for r in reports))
    return Topology(tuple(specs), tuple(warnings), states)
