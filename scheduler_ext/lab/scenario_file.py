"""``simulate --scenario FILE``: an operator's own fleet and event list.

The file is YAML (or JSON, which YAML reads too)::

    flavors:                      # name -> resources (resource class: amount)
      small: {VCPU: 2, MEMORY_MB: 4096, DISK_GB: 40}
      large: {VCPU: 8, MEMORY_MB: 16384, DISK_GB: 160}
    sharing:                      # optional: shared storage providers
      - {name: ceph, disk_gb: 100000}
    hosts:                        # compute nodes
      - name: cn                  # with count N: cn-0 .. cn-(N-1)
        count: 4
        inventory:                # class -> total (and optionally reserved,
          VCPU: {total: 16, allocation_ratio: 4.0}   # min_unit, max_unit,
          MEMORY_MB: {total: 65536, reserved: 512}   # step_size,
        sharing: ceph             # allocation_ratio); DISK_GB from ceph
    storage_reports:              # optional: `scheduler-ext storage discover`
      - reports/cn-0.json         # output of hosts named above (paths relative
      - reports/cn-1.json         # to this file): one sharing provider per
                                  # storage domain, DISK_GB from it
    servers:                      # optional: servers present at the start
      - {name: web1, flavor: small, host: cn-0}
    events:                       # replayed in order
      - {op: resize, server: web1, flavor: large}
      - {op: confirm, server: web1}
      - {op: boot, server: db1, flavor: small}
      - {op: reconcile}

``op`` is one of boot (needs ``flavor``), resize (needs ``flavor``),
migrate, confirm, revert, fail (a failure on the destination: nova
reverts and reschedules to an alternate), delete and reconcile (no
``server``). A host without DISK_GB inventory takes DISK_GB from its
``sharing`` provider. With ``storage_reports`` the storage layout comes
from the hosts' own reports instead: the hosts they name (which must not
also name a ``sharing`` provider) get one sharing provider per storage
domain, built as ``scheduler-ext storage sync`` builds it, and take DISK_GB
from it when they have no DISK_GB inventory. ``load`` checks the file
against ``SCHEMA``, the names it uses and the reports; a problem is
reported with its line number.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import jsonschema
import yaml

from scheduler_ext import errors
from scheduler_ext.placement import validation
from scheduler_ext.storage import report as storage_report
from scheduler_ext.storage import topology
from scheduler_ext.storage.errors import ReportError
from scheduler_ext.storage.report import HostReport

OPS_WITH_FLAVOR = ("boot", "resize")
OPS = OPS_WITH_FLAVOR + ("migrate", "confirm", "revert", "fail", "delete",
                         "reconcile")
_NAME = {"type": "string", "minLength": 1, "maxLength": 200}
_AMOUNT = {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}
_INVENTORY = {
    "type": "object", "additionalProperties": False, "required": ["total"],
    "properties": {"total": _AMOUNT, "reserved": {"type": "integer", "minimum": 0},
                   "min_unit": _AMOUNT, "max_unit": _AMOUNT, "step_size": _AMOUNT,
                   "allocation_ratio": {"type": "number", "exclusiveMinimum": 0}}}
SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "required": ["flavors", "hosts", "events"],
    "properties": {
        "flavors": {"type": "object", "minProperties": 1,
                    "additionalProperties": {
                        "type": "object", "minProperties": 1,
                        "additionalProperties": _AMOUNT}},
        "sharing": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["name", "disk_gb"],
            "properties": {"name": _NAME, "disk_gb": _AMOUNT}}},
        "hosts": {"type": "array", "minItems": 1, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["name", "inventory"],
            "properties": {"name": _NAME,
                           "count": {"type": "integer", "minimum": 1,
                                     "maximum": 1_000_000},
                           "inventory": {"type": "object", "minProperties": 1,
                                         "additionalProperties": _INVENTORY},
                           "sharing": _NAME}}},
        "storage_reports": {"type": "array", "minItems": 1, "items": _NAME},
        "servers": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["name", "flavor", "host"],
            "properties": {"name": _NAME, "flavor": _NAME, "host": _NAME}}},
        "events": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["op"],
            "properties": {"op": {"enum": list(OPS)}, "server": _NAME,
                           "flavor": _NAME},
            "allOf": [
                {"if": {"properties": {"op": {"enum": list(OPS_WITH_FLAVOR)}}},
                 "then": {"required": ["server", "flavor"]}},
                {"if": {"properties": {"op": {"const": "reconcile"}}},
                 "then": {"not": {"anyOf": [{"required": ["server"]},
                                            {"required": ["flavor"]}]}},
                 "else": {"required": ["server"]}}]}},
    },
}


class ScenarioError(Exception):
    """The scenario file is not usable; the message names the line."""


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A checked scenario: ``hosts`` expanded (one dict per compute node,
    ``name`` unique), the rest as written."""

    flavors: dict[str, dict[str, int]]
    sharing: list[dict[str, Any]]
    hosts: list[dict[str, Any]]
    servers: list[dict[str, Any]]
    events: list[dict[str, Any]]
    reports: list[HostReport] = dataclasses.field(default_factory=list)


def _line(root: yaml.Node | None, path: list[Any]) -> int:
    """1-based line of the node at ``path`` (the deepest that exists)."""
    node = root
    line = node.start_mark.line if node is not None else 0
    for key in path:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) \
                and key < len(node.value):
            node = node.value[key]
        else:
            node = None
        if node is None:
            break
        line = node.start_mark.line
    return line + 1


def load(text: str, name: str) -> Scenario:
    """Parse and check a scenario; ScenarioError naming ``name`` and the
    line of the first problem."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "?"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{name}: {where}: not valid YAML/JSON: {problem}") from None
    validator = jsonschema.Draft202012Validator(SCHEMA)
    found = sorted(validator.iter_errors(data),
                   key=lambda e: _line(root, list(e.absolute_path)))
    if found:
        err = found[0]
        where = "/".join(str(p) for p in err.absolute_path) or "the top level"
        raise ScenarioError(f"{name}: line {_line(root, list(err.absolute_path))}: "
                            f"{where}: {err.message}")
    try:
        scenario = _checked(data)
        reports = _reports(data, os.path.dirname(name))
    except _NameProblem as exc:
        raise ScenarioError(f"{name}: line {_line(root, exc.path)}: "
                            f"{'/'.join(map(str, exc.path))}: {exc}") from None
    return dataclasses.replace(scenario, reports=reports)


class _NameProblem(Exception):
    def __init__(self, path: list[Any], text: str):
        super().__init__(text)
        self.path = path


def _checked(data: dict[str, Any]) -> Scenario:
    """The names the file uses refer to what it defines."""
    for fname, res in data["flavors"].items():
        for rc in res:
            try:
                validation.resource_class(rc)
            except errors.InvalidRequest as exc:
                raise _NameProblem(["flavors", fname, rc], exc.detail) from None
    sharing = {s["name"]: i for i, s in enumerate(data.get("sharing", []))}
    hosts: list[dict[str, Any]] = []
    for i, h in enumerate(data["hosts"]):
        for rc, inv in h["inventory"].items():
            try:
                validation.resource_class(rc)
            except errors.InvalidRequest as exc:
                raise _NameProblem(["hosts", i, "inventory", rc], exc.detail) from None
            _inventory(["hosts", i, "inventory", rc], inv)
        if "sharing" in h and h["sharing"] not in sharing:
            raise _NameProblem(["hosts", i, "sharing"],
                               f"no sharing provider named {h['sharing']!r}")
        count = h.get("count")
        names = [h["name"]] if count is None else \
            [f"{h['name']}-{k}" for k in range(count)]
        hosts += [dict(h, name=n, line_index=i) for n in names]
    seen = {s: "sharing" for s in sharing}
    for h in hosts:
        if h["name"] in seen:
            raise _NameProblem(["hosts", h["line_index"], "name"],
                               f"name {h['name']!r} used twice")
        seen[h["name"]] = "host"
    servers: set[str] = set()
    free = _Free(hosts, data.get("sharing", []), bool(data.get("storage_reports")))
    for i, s in enumerate(data.get("servers", [])):
        _known(data, ["servers", i], s, seen)
        if s["name"] in servers:
            raise _NameProblem(["servers", i, "name"], f"server {s['name']!r} twice")
        servers.add(s["name"])
        free.take(["servers", i], s, data["flavors"][s["flavor"]])
    for i, e in enumerate(data["events"]):
        _known(data, ["events", i], e, seen)
        if e["op"] == "boot":
            servers.add(e["server"])
        elif "server" in e and e["server"] not in servers:
            raise _NameProblem(["events", i, "server"],
                               f"server {e['server']!r} is not declared or "
                               "booted before this event")
    return Scenario(data["flavors"], data.get("sharing", []), hosts,
                    data.get("servers", []), data["events"])


def _inventory(path: list[Any], inv: dict[str, Any]) -> None:
    """What the schema cannot say about one inventory, as placement checks it."""
    ratio = inv.get("allocation_ratio", 1.0)
    if not math.isfinite(ratio):
        raise _NameProblem(path + ["allocation_ratio"],
                           f"must be a finite number > 0, got {ratio}")
    if inv.get("reserved", 0) > inv["total"]:
        raise _NameProblem(path + ["reserved"], f"{inv['reserved']} is above "
                           f"total {inv['total']}")
    if inv.get("min_unit", 1) > inv.get("max_unit", 2**31 - 1):
        raise _NameProblem(path + ["max_unit"], f"{inv['max_unit']} is below "
                           f"min_unit {inv['min_unit']}")


class _Free:
    """What the hosts (and sharing providers) have left while the servers
    present at the start are placed: a server that cannot fit is bad input,
    named by its line, not a broken invariant of the run."""

    def __init__(self, hosts: list[dict[str, Any]], sharing: list[dict[str, Any]],
                 disk_from_reports: bool):
        self.hosts = {h["name"]: h for h in hosts}
        self.disk_from_reports = disk_from_reports
        self.left: dict[tuple[str, str], int] = {}
        for h in hosts:
            for rc, inv in h["inventory"].items():
                self.left[h["name"], rc] = int(
                    (inv["total"] - inv.get("reserved", 0))
                    * inv.get("allocation_ratio", 1.0))
        for sp in sharing:
            self.left[sp["name"], "DISK_GB"] = sp["disk_gb"]

    def take(self, path: list[Any], server: dict[str, Any],
             flavor: dict[str, int]) -> None:
        host = self.hosts.get(server["host"])
        if host is None:        # a sharing provider's name: _known says so
            return
        for rc, amount in flavor.items():
            where = host["sharing"] if rc == "DISK_GB" and "sharing" in host \
                and rc not in host["inventory"] else host["name"]
            key = (where, rc)
            if key not in self.left:
                if rc == "DISK_GB" and self.disk_from_reports:
                    continue    # disk from storage_reports: placed by the run
                raise _NameProblem(path + ["host"], f"server {server['name']!r} "
                                   f"needs {rc} but {where!r} has no {rc} "
                                   "inventory")
            if amount > self.left[key]:
                raise _NameProblem(path + ["host"], f"server {server['name']!r} "
                                   f"needs {rc} {amount} but {where!r} has "
                                   f"{self.left[key]} left (after reserved, "
                                   "allocation_ratio and the servers above)")
            self.left[key] -= amount


def _reports(data: dict[str, Any], directory: str) -> list[HostReport]:
    """The host reports ``storage_reports`` names (paths relative to the
    scenario file), each of a host the scenario defines without a
    ``sharing`` provider of its own."""
    hosts = {h["name"]: h for h in data["hosts"]}
    for h in data["hosts"]:
        for k in range(h.get("count", 0)):
            hosts[f"{h['name']}-{k}"] = h
    out = []
    for i, rel in enumerate(data.get("storage_reports", [])):
        path = os.path.join(directory, rel)
        try:
            with open(path, encoding="utf-8") as f:
                rep = storage_report.loads(f.read(), origin=path)
        except (OSError, UnicodeDecodeError) as exc:
            raise _NameProblem(["storage_reports", i], f"cannot read {path}: {exc}") from None
        except ReportError as exc:
            raise _NameProblem(["storage_reports", i], str(exc)) from None
        if rep.host not in hosts:
            raise _NameProblem(["storage_reports", i],
                               f"{path} reports host {rep.host!r}, which the "
                               "scenario does not define")
        if "sharing" in hosts[rep.host]:
            raise _NameProblem(["storage_reports", i],
                               f"host {rep.host!r} names a sharing provider and "
                               "has a storage report: give one or the other")
        out.append(rep)
    if out:
        try:
            topology.build(out)
        except ReportError as exc:
            raise _NameProblem(["storage_reports"], str(exc)) from None
    return out


def _known(data: dict[str, Any], path: list[Any], item: dict[str, Any],
           names: dict[str, str]) -> None:
    if "flavor" in item and item["flavor"] not in data["flavors"]:
        raise _NameProblem(path + ["flavor"], f"no flavor named {item['flavor']!r}")
    if "host" in item and names.get(item["host"]) != "host":
        raise _NameProblem(path + ["host"], f"no host named {item['host']!r}")
