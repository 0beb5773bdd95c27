"""The evacuation half of the planner: which servers of fenced hosts are
queued, where each goes, and what became of each evacuation asked.

nova's evacuate is asynchronous: its 202 says only that it started. So
every evacuation asked is followed (a *record*) until the servers as nova
shows them tell its outcome: on another host (done; in ERROR there: an
alert), still busy (wait), or still on its fenced source with no task in
progress (failed: NoValidHost leaves it in ERROR there). A failed one, or
one nova refused outright, is queued again, to a host not tried yet when
there is one, up to ``evacuation_attempts`` attempts; then one alert and it
is left for the operator.

A server whose DISK_GB is on a sharing provider is never sent to a named
host whose compute node offers no DISK_GB: nova asks placement ``in_tree``
of a named host, which leaves sharing providers out (NoValidHost). Without
such a host of its domain it is evacuated without a host only when every
host nova's scheduler could choose is healthy and of the server's domain;
otherwise it is refused, alerted once, and stays queued.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Iterable, Protocol

from scheduler_ext.storage.evacuation_model import Action, ClusterHost, Instance
from scheduler_ext.storage.fencing_policy import Policy


class Fleet(Protocol):
    """What the queue reads of the planner: hosts by name and by cluster,
    the clusters whose storage quorum is lost, each host's health."""

    policy: Policy
    hosts: dict[str, ClusterHost]
    clusters: dict[str, list[str]]
    quorum_lost: set[str]

    def healthy(self, name: str) -> bool: ...


@dataclasses.dataclass
class _Evacuation:
    """An evacuation issued by the planner, until its outcome is known.
    ``state``: ``in-flight`` (asked, outcome unknown), ``retry`` (failed,
    queued again) or ``given-up`` (failed ``attempts`` times, alerted)."""

    source: str
    destination: str | None
    at: float
    attempts: int = 1
    tried: list[str | None] = dataclasses.field(default_factory=list)
    state: str = "in-flight"
    error: str = ""


class EvacuationQueue:
    """The servers to evacuate per fenced host, and the evacuations asked
    (``records``, by server uuid) until their outcome is known."""

    def __init__(self, fleet: Fleet, instances: Iterable[Instance]):
        self.fleet = fleet
        self.see(list(instances))
        self.to_evacuate: dict[str, list[str]] = {}
        self.stranded: set[str] = set()     # alerted: no destination
        self.refused: set[str] = set()      # alerted: no named host, no scheduler
        self.records: dict[str, _Evacuation] = {}

    def state(self) -> dict[str, Any]:
        """JSON-able; part of the planner's state."""
        return {
            "to_evacuate": {n: list(q) for n, q in sorted(self.to_evacuate.items())},
            "stranded": sorted(self.stranded),
            "refused": sorted(self.refused),
            "evacuations": {u: dataclasses.asdict(e)
                            for u, e in sorted(self.records.items())}}

    def restore(self, state: dict[str, Any]) -> None:
        """Raises TypeError, AttributeError or KeyError for data that is
        not a queue's state."""
        hosts = self.fleet.hosts
        self.to_evacuate = {
            n: [u for u in q if self.placed.get(u) == n]
            for n, q in state.get("to_evacuate", {}).items() if n in hosts}
        self.stranded = set(state.get("stranded", [])) & set(self.instances)
        self.refused = set(state.get("refused", [])) & set(self.instances)
        self.records = {
            u: _Evacuation(**e) for u, e in
            state.get("evacuations", {}).items() if e["source"] in hosts}

    def host_fenced(self, name: str) -> None:
        self.to_evacuate[name] = sorted(
            u for u, h in self.placed.items() if h == name)

    def host_back(self, name: str) -> list[str]:
        """Forget what was queued or followed for ``name``; notes of what
        was dropped."""
        notes = []
        left = self.to_evacuate.pop(name, [])
        if left:
            notes.append(f"{len(left)} evacuation(s) dropped, those instances "
                         "stay on it")
        records = sorted(u for u, e in self.records.items() if e.source == name)
        for uuid in records:
            del self.records[uuid]
        if records:
            notes.append(f"{len(records)} evacuation record(s) dropped")
        return notes

    def trust_earlier(self) -> None:
        """No servers to check against (a simulation): evacuations asked
        earlier are taken as done."""
        self.records = {u: e for u, e in self.records.items()
                        if e.state != "in-flight"}

    def see(self, servers: list[Instance]) -> None:
        """The servers as nova shows them now (ValueError for one on a host
        the planner does not know)."""
        unknown = sorted({i.host for i in servers} - set(self.fleet.hosts))
        if unknown:
            raise ValueError(f"instances on unknown hosts: {', '.join(unknown)}")
        self.instances = {i.uuid: i for i in servers}
        self.placed = {i.uuid: i.host for i in servers}

    def check(self, now: float, out: list[Action]) -> None:
        """The outcome of each evacuation asked earlier, from the servers
        as nova shows them now."""
        for uuid, ev in sorted(self.records.items()):
            inst = self.instances.get(uuid)
            if inst is None:
                del self.records[uuid]
                out.append(Action(now, "log", ev.source, (
                    f"server {uuid} is gone; its evacuation is no longer "
                    "followed"), instance=uuid))
            elif inst.busy:
                continue            # nova is still at it
            elif inst.host != ev.source:
                del self.records[uuid]
                if inst.status == "ERROR":
                    out.append(Action(now, "alert", ev.source, (
                        f"server {uuid} evacuated to {inst.host} but in ERROR "
                        "there: left for the operator"), instance=uuid))
                elif ev.state == "in-flight":
                    out.append(Action(now, "log", ev.source, (
                        f"server {uuid} evacuated to {inst.host} "
                        f"({inst.status})"), instance=uuid))
            elif ev.state == "in-flight":
                self.failed(now, uuid, (
                    f"the server is still on {ev.source} ({inst.status}) "
                    "with no task in progress"), out)

    def failed(self, now: float, uuid: str, why: str,
               out: list[Action]) -> None:
        """The evacuation of ``uuid`` failed (``why``): queued again at the
        front of its host's queue, or given up after the last attempt."""
        ev = self.records[uuid]
        ev.error = why
        limit = self.fleet.policy.evacuation_attempts
        where = ev.destination or "the host nova's scheduler picks"
        if ev.attempts < limit:
            ev.state = "retry"
            queue = self.to_evacuate.setdefault(ev.source, [])
            if uuid not in queue:
                queue.insert(0, uuid)
            out.append(Action(now, "evacuation-failed", ev.source, (
                f"server {uuid}: attempt {ev.attempts} of {limit} to "
                f"{where}: {why}; retried on a later tick"), instance=uuid,
                destination=ev.destination))
        else:
            ev.state = "given-up"
            out.append(Action(now, "alert", ev.source, (
                f"evacuation of server {uuid} failed {ev.attempts} time(s) "
                f"(tried {', '.join(h or 'nova scheduler' for h in ev.tried)}; "
                f"last: {why}): not retried, left for the operator"),
                instance=uuid, destination=ev.destination))

    def destination(self, uuid: str, named: bool = True) -> str | None:
        """The least-loaded healthy host (then by name) that can take the
        instance, in a cluster whose storage quorum holds: one of its
        storage domain when its disks are shared; a host an earlier attempt
        failed on only when no other is left. ``named``: nova is given the
        host, so a disk on a sharing provider needs one whose compute node
        offers DISK_GB (``in_tree`` leaves the sharing provider out)."""
        inst = self.instances[uuid]
        ev = self.records.get(uuid)
        tried = set(ev.tried) if ev else set()
        source = self.fleet.hosts[inst.host]
        load = collections.Counter(self.placed.values())
        options = []
        for h in self.fleet.hosts.values():
            if h.name == inst.host or not self.fleet.healthy(h.name) \
                    or h.cluster in self.fleet.quorum_lost:
                continue
            if inst.domain is not None and inst.domain not in h.domains:
                continue
            if h.capacity is not None and load[h.name] >= h.capacity:
                continue
            if named and inst.sharing_disk and not h.node_disk:
                continue
            options.append(h)
        if not options:
            return None
        best = min(options, key=lambda h: (h.name in tried,
                                           h.cluster != source.cluster,
                                           load[h.name], h.name))
        return best.name

    def _unscheduled_risk(self, inst: Instance) -> str:
        """Why nova's scheduler may not choose the host of ``inst`` ("" when
        every host it could choose is healthy and of the instance's domain;
        its quorum holding)."""
        choosable = sorted(h.name for h in self.fleet.hosts.values()
                           if h.name != inst.host and h.schedulable)
        if not choosable:
            return "nova has no up and enabled compute service to choose"
        outside = [n for n in choosable if inst.domain is not None
                   and inst.domain not in self.fleet.hosts[n].domains]
        if outside:
            return (f"nova's scheduler could choose {', '.join(outside)}, "
                    f"outside storage domain {inst.domain}, where its disk "
                    "is not")
        unsafe = [n for n in choosable if not self.fleet.healthy(n)
                  or self.fleet.hosts[n].cluster in self.fleet.quorum_lost]
        if unsafe:
            return (f"nova's scheduler could choose {', '.join(unsafe)}, "
                    "not healthy by the storage's account")
        return ""

    def _refuse(self, now: float, inst: Instance, named: str, why: str,
                out: list[Action]) -> None:
        if inst.uuid in self.refused:
            return
        self.refused.add(inst.uuid)
        out.append(Action(now, "alert", inst.host, (
            f"server {inst.uuid} not evacuated to {named}: its DISK_GB is on "
            f"a sharing provider and {named}'s compute node offers no "
            f"DISK_GB, so nova (asking placement in_tree of {named}) would "
            f"find no valid host; nor evacuated without a host: {why}. "
            f"Workaround: disable the compute services outside storage "
            f"domain {inst.domain} (openstack compute service set --disable "
            "HOST nova-compute) until it is evacuated; it stays queued"),
            instance=inst.uuid, destination=named))

    def evacuate(self, now: float, cluster: str, out: list[Action]) -> None:
        """Start at most ``evacuation_batch`` queued evacuations of
        ``cluster``'s fenced hosts; a refused server stays queued."""
        budget = self.fleet.policy.evacuation_batch
        for name in self.fleet.clusters[cluster]:
            pending = self.to_evacuate.get(name, [])
            held: list[str] = []        # refused this tick: kept queued
            while pending and budget:
                uuid = pending[0]
                inst = self.instances[uuid]
                dest = self.destination(uuid)
                scheduled = ""      # why nova's scheduler chooses the host
                if dest is None and inst.sharing_disk:
                    named = self.destination(uuid, named=False)
                    why = self._unscheduled_risk(inst) if named else ""
                    if named and why:
                        self._refuse(now, inst, named, why, out)
                        held.append(pending.pop(0))
                        continue
                    if named:
                        scheduled = (
                            f"its DISK_GB is on a sharing provider and no "
                            f"compute node of domain {inst.domain} offers "
                            "DISK_GB: nova's scheduler chooses (every host "
                            "it can choose is of that domain)")
                if dest is None and not scheduled:
                    if uuid not in self.stranded:
                        self.stranded.add(uuid)
                        out.append(Action(now, "alert", name, (
                            f"no healthy destination for instance {uuid}"
                            + (f" in storage domain {inst.domain}"
                               if inst.domain else "")), instance=uuid))
                    break
                pending.pop(0)
                self.stranded.discard(uuid)
                self.refused.discard(uuid)
                budget -= 1
                if dest is not None:
                    self.placed[uuid] = dest
                ev = self.records.get(uuid)
                reason = scheduled or "fence confirmed"
                if ev is None:
                    self.records[uuid] = _Evacuation(name, dest, now,
                                                     tried=[dest])
                else:
                    ev.attempts += 1
                    ev.destination, ev.at, ev.state = dest, now, "in-flight"
                    ev.tried.append(dest)
                    reason = (f"retry, attempt {ev.attempts} of "
                              f"{self.fleet.policy.evacuation_attempts}"
                              + (f"; {scheduled}" if scheduled else ""))
                out.append(Action(now, "evacuate", name, reason,
                                  instance=uuid, destination=dest))
            pending[:0] = held
