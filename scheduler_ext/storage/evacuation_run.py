"""One tick of the evacuation planner on a real cloud: nova's compute
services and servers (compute API), the hosts' storage reports, and the
storage cluster's own view of its members; the planner's memory kept in a
state file between ticks.

* A host whose nova-compute service is ``down`` is a suspect; one that is
  ``forced_down`` is fenced (the operator or a fencing agent says it is
  off: nova's own precondition for an evacuation).
* A host's storage cluster is its reports' filesystem (hosts without a
  shared report form a cluster of their own); its instances' storage
  domain is its report's domain, for servers with an image or with DISK_GB
  on a sharing provider (ephemeral or swap disks); a volume-backed server
  without either keeps nothing on the host's storage: any host.
* The storage view (``StorageView``): which hosts are quorum members and
  which the storage reports down. Without one, every reported host is a
  quorum member and up: the quorum guarantees then rest on heartbeats
  alone, and the command says so.
* Placement (``DiskPlacement``, optional): which servers of fenced hosts
  hold their DISK_GB on a sharing provider, and which hosts' compute nodes
  offer DISK_GB. Without it every server is taken to hold its disk on its
  compute node: a named-host evacuation of a shared-disk server onto a node
  offering no DISK_GB then fails in nova, and is retried and alerted like
  any failed evacuation; the command says so.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Protocol

from scheduler_ext.storage import compute_api
from scheduler_ext.storage.evacuation_disk import DiskPlacement
from scheduler_ext.storage.errors import StorageError
from scheduler_ext.storage.evacuation import (
    Action, ClusterHost, EvacuationPlanner, Instance)
from scheduler_ext.storage.fencing_policy import Policy
from scheduler_ext.storage.report import HostReport


@dataclasses.dataclass(frozen=True)
class StorageView:
    """The storage cluster's own account of its members: ``quorum`` the
    quorum members (None: every host), ``down`` those out of the quorum."""

    quorum: frozenset[str] | None = None
    down: frozenset[str] = frozenset()


def storage_view(text: str, origin: str = "storage view") -> StorageView:
    """``{"quorum": [hosts], "down": [hosts]}`` (both optional)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise StorageError(f"{origin}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not all(
            isinstance(data.get(k, []), list) and
            all(isinstance(h, str) for h in data.get(k, []))
            for k in ("quorum", "down")):
        raise StorageError(f"{origin}: expected {{\"quorum\": [host, ...], "
                           "\"down\": [host, ...]}")
    quorum = data.get("quorum")
    return StorageView(None if quorum is None else frozenset(quorum),
                       frozenset(data.get("down", [])))


@dataclasses.dataclass
class Tick:
    """One tick's actions at ``now``; ``execute`` appends the outcome of
    carrying them out (failed evacuations) to ``actions``."""

    now: float
    actions: list[Action]
    planner: EvacuationPlanner
    notes: list[str]

    @property
    def state(self) -> dict[str, Any]:
        return self.planner.state()


def _cluster_hosts(services: list[compute_api.ComputeService],
                   reports: Mapping[str, HostReport],
                   view: StorageView,
                   node_disk: set[str] | None) -> list[ClusterHost]:
    out = []
    for svc in services:
        report = reports.get(svc.host)
        shared = report is not None and report.state == "shared"
        cluster = ((report.filesystem or report.domain) if shared and report
                   else f"local:{svc.host}")
        domains = frozenset([report.domain]) if shared and report and \
            report.domain else frozenset()
        quorum = shared and (view.quorum is None or svc.host in view.quorum)
        out.append(ClusterHost(
            svc.host, str(cluster), quorum, domains,
            node_disk=node_disk is None or svc.host in node_disk,
            schedulable=(svc.state == "up" and svc.status == "enabled"
                         and not svc.forced_down)))
    return out


def _in_domains_of(hosts: list[str], services: list[compute_api.ComputeService],
                   reports: Mapping[str, HostReport]) -> set[str]:
    """The compute hosts sharing a storage domain with one of ``hosts``:
    the only ones a shared-disk server of those may be sent to, so the
    only ones whose compute node's DISK_GB is worth a read."""
    def domain(host: str) -> str | None:
        report = reports.get(host)
        return report.domain if report is not None and report.state == "shared" \
            else None
    wanted = {domain(h) for h in hosts} - {None}
    return {svc.host for svc in services if domain(svc.host) in wanted}


def tick(api: compute_api.ComputeEndpoint, reports: Mapping[str, HostReport],
         policy: Policy, now: float, state: Mapping[str, Any] | None = None,
         view: StorageView | None = None,
         disks: DiskPlacement | None = None) -> Tick:
    """The planner's actions at ``now`` (seconds since the epoch) and its
    state afterwards (reads only: services, the servers of each host, and
    with ``disks`` placement's view of the fenced hosts' servers)."""
    view = view or StorageView()
    notes = []
    if view.quorum is None and not view.down:
        notes.append("no storage view given: every reported host counts as "
                     "an up quorum member; the storage cluster's own account "
                     "(--storage-view) makes the quorum checks real")
    services = compute_api.compute_services(api)
    known = {s.host for s in services}
    unknown = sorted((set(view.down) | set(view.quorum or ())) - known)
    if unknown:
        raise StorageError(f"storage view names hosts nova does not know: "
                           f"{', '.join(unknown)}")
    if disks is None:
        notes.append("no placement access: a server whose DISK_GB is on a "
                     "sharing provider may be sent to a named host whose "
                     "compute node offers none, which nova fails "
                     "(NoValidHost); --placement-url, --os-cloud or "
                     "--config-file lets the planner avoid that")
    on_host = {svc.host: compute_api.servers_on(api, svc.host)
               for svc in services}
    fenced = [srv["id"] for svc in services if svc.forced_down
              for srv in on_host[svc.host]]
    sharing = disks.sharing_disk(fenced) if disks and fenced else set()
    node_disk = (disks.nodes_offering_disk(_in_domains_of(
        [svc.host for svc in services for srv in on_host[svc.host]
         if srv["id"] in sharing], services, reports)) if disks and sharing
        else None)
    hosts = _cluster_hosts(services, reports, view, node_disk)
    domains = {h.name: next(iter(h.domains), None) for h in hosts}
    instances = []
    for svc in services:
        for srv in on_host[svc.host]:
            # a volume-backed server may still hold DISK_GB (ephemeral,
            # swap) on its host's sharing provider: those disks are there
            on_disk = domains[svc.host] \
                if srv.get("image") or srv["id"] in sharing else None
            instances.append(Instance(
                srv["id"], svc.host, on_disk, str(srv.get("status", "")),
                srv.get("OS-EXT-STS:task_state") is not None,
                srv["id"] in sharing))
    planner = EvacuationPlanner(hosts, instances, policy)
    if state:
        planner.restore(dict(state))
    actions = planner.tick(
        now, [s.host for s in services if s.state == "down"],
        view.down, [s.host for s in services if s.forced_down], instances)
    return Tick(now, actions, planner, notes)


class Fencer(Protocol):
    """Carries out one ladder step (restart-agent, graceful-reboot or
    hard-reboot) on a host; returns what happened, in one line. A fence
    counts only once confirmed (the compute service forced down)."""

    def __call__(self, step: str, host: str) -> str: ...


FENCE_STEPS = ("restart-agent", "graceful-reboot", "hard-reboot")


def execute(api: compute_api.ComputeEndpoint, tick: Tick,
            fencer: Fencer | None = None) -> list[str]:
    """Carry out the tick's evacuations (through nova's API) and, with a
    ``fencer``, its ladder steps; one line per ladder step (what the fencer
    said, or the step for the operator: nova has no fencing API). An
    evacuation nova refuses does not stop the others: the planner records
    it (``tick.state``) and its outcome joins ``tick.actions``."""
    lines = []
    for a in list(tick.actions):
        if a.kind == "evacuate":
            assert a.instance
            try:
                compute_api.evacuate(api, a.instance, a.destination)
            except StorageError as exc:
                tick.actions += tick.planner.evacuation_failed(
                    tick.now, a.instance, f"nova refused: {exc}")
        elif a.kind in FENCE_STEPS:
            lines.append(f"{a.kind} {a.host}: " + (
                fencer(a.kind, a.host) if fencer else a.reason))
    return lines
