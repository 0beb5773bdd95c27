"""Quorum-safe fencing and evacuation for hosts on clustered storage.

On hyper-converged clusters (the compute hosts are also the storage
cluster's members) fencing several hosts at once can destroy the storage
quorum and turn one sick host into a whole-cluster outage. This planner
decides, tick by tick on a clock the caller provides, what to do with
suspect hosts (their heartbeat is lost). Its guarantees, per storage
cluster:

* **Never while storage quorum is lost.** When fewer than a strict majority
  of the quorum members are up by the storage cluster's own account, it
  alerts once and neither fences nor evacuates there (nor evacuates into
  it) until the quorum is back.
* **Suspects are not counted live.** A fence of a quorum member the storage
  still counts is issued only when the *healthy* quorum members (heartbeat
  fine, not fenced, no fence of ours pending, up in the storage) are a
  strict majority on their own: whatever happens to the suspects, the
  quorum survives. In a 2-node cluster that is never true: it alerts.
* **Mass-failure brake.** When ``brake_fraction`` or more of a cluster's
  hosts are suspect at once (a 2|2 split included), it is a storage
  incident, not host failures: one alert, no fencing and no evacuation
  until it is over.
* **At most ``fence_batch`` fences in flight.** A fence not confirmed
  within ``fence_timeout`` is *stuck*: one alert, it stops holding a batch
  slot, and its host still counts as down for the quorum (the fence may
  yet land). A late confirmation still counts.
* **Never a host whose heartbeat is back.** A host that comes back drops
  out of everything: its pending fence is abandoned, its ladder reset, its
  evacuation queue cleared (what is left stays on it). A confirmation
  arriving in the tick its heartbeat returns is ignored.
* Each suspect host climbs the action ladder (``log-only``,
  ``restart-agent``, ``graceful-reboot``, ``hard-reboot``, configurable;
  the default stops at ``graceful-reboot``), one step per ``step_timeout``
  while it stays suspect. The reboots are fences: they count only when the
  caller confirms them (for nova: the operator, or a fencing agent, forcing
  the compute service down says the host is fenced; a confirmation counts
  whether or not the planner asked for the fence). A fence deferred for ``fence_timeout``
  alerts once: nobody waits silently.
* A host's instances are evacuated only after its fence is confirmed, at
  most ``evacuation_batch`` per cluster per tick. An instance whose disks
  are on shared storage goes to a healthy host of the same storage domain
  (its disks are there); one with local disks to any healthy host.
* **Every evacuation's outcome is checked** when the caller passes the
  servers as nova shows them (``tick(servers=...)``) or reports a refused
  request (``evacuation_failed``): nova's evacuate is asynchronous, and a
  server still on its fenced source with no task in progress (in ERROR
  after NoValidHost, say) has failed. A failed one is queued again, to a
  host not tried yet when there is one, up to ``evacuation_attempts``
  attempts in all; then one alert and it is left for the operator.
* **A disk on a sharing provider is never sent to a named host whose
  compute node offers no DISK_GB**: nova asks placement ``in_tree`` of a
  named host, which leaves sharing providers out (NoValidHost). Such a
  server goes to a host of its domain whose node offers DISK_GB; without
  one it is left to nova's scheduler (evacuate without a host) only when
  every host that scheduler could choose is of the server's storage domain
  and healthy; otherwise it is refused, alerted once, and stays queued
  until that changes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from scheduler_ext.storage.fencing_policy import FENCES, Policy

@dataclasses.dataclass(frozen=True)
class ClusterHost:
    name: str
    cluster: str
    quorum: bool = True
    domains: frozenset[str] = frozenset()
    capacity: int | None = None       # instances it can take; None: no limit
    #: its compute node offers DISK_GB of its own: a named-host evacuation
    #: of a server whose disk is on a sharing provider can land there
    node_disk: bool = True
    #: nova's scheduler may choose it (compute service up and enabled)
    schedulable: bool = True


@dataclasses.dataclass(frozen=True)
class Instance:
    uuid: str
    host: str
    domain: str | None = None         # storage domain of its disks, if shared
    status: str = "ACTIVE"            # nova's server status
    busy: bool = False                # a task in progress (nova's task_state)
    sharing_disk: bool = False        # its DISK_GB is on a sharing provider


@dataclasses.dataclass(frozen=True)
class Action:
    """``kind``: log, alert, restart-agent, graceful-reboot, hard-reboot,
    evacuate (``instance`` to ``destination``; None: nova's scheduler
    chooses) or evacuation-failed (one failed attempt, to be retried)."""

    at: float
    kind: str
    host: str
    reason: str = ""
    instance: str | None = None
    destination: str | None = None


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


@dataclasses.dataclass
class _Suspect:
    since: float
    step: int = -1             # index in the ladder of the last step taken
    step_at: float = 0.0
    fencing: bool = False      # a fence in flight (holds a batch slot)
    fence: str = ""            # the last fence issued (a ladder step)
    fence_at: float = 0.0
    stuck: bool = False        # a fence timed out unconfirmed
    deferred: str = ""         # the reason last logged for a deferred fence
    deferred_since: float | None = None
    deferral_alerted: bool = False
    exhausted: bool = False

    @property
    def unconfirmed(self) -> bool:
        """A fence of ours was issued and may still land."""
        return self.fencing or self.stuck


def majority(members: int) -> int:
    return members // 2 + 1


class EvacuationPlanner:
    """The state of fencing and evacuation across clusters; ``tick`` is the
    only entry point and is deterministic for the same inputs."""

    def __init__(self, hosts: Iterable[ClusterHost],
                 instances: Iterable[Instance], policy: Policy | None = None):
        self.policy = policy or Policy()
        self.hosts = {h.name: h for h in hosts}
        self.clusters: dict[str, list[str]] = {}
        for h in sorted(self.hosts.values(), key=lambda h: h.name):
            self.clusters.setdefault(h.cluster, []).append(h.name)
        instances = list(instances)
        self.placed = {i.uuid: i.host for i in instances}
        self.instances = {i.uuid: i for i in instances}
        unknown = sorted({h for h in self.placed.values() if h not in self.hosts})
        if unknown:
            raise ValueError(f"instances on unknown hosts: {', '.join(unknown)}")
        self.suspects: dict[str, _Suspect] = {}
        self.fenced: set[str] = set()
        self.storage_down: set[str] = set()
        self.incidents: set[str] = set()
        self.quorum_lost: set[str] = set()
        self.to_evacuate: dict[str, list[str]] = {}
        self.stranded: set[str] = set()     # alerted: no destination
        self.evacuations: dict[str, _Evacuation] = {}
        self.refused: set[str] = set()      # alerted: no named host, no scheduler

    # -------------------------------------------------------------- state
    def state(self) -> dict[str, Any]:
        """What the planner remembers between ticks, as JSON-able data (a
        command run once per tick keeps it in a file)."""
        return {
            "suspects": {n: dataclasses.asdict(s)
                         for n, s in sorted(self.suspects.items())},
            "fenced": sorted(self.fenced), "incidents": sorted(self.incidents),
            "quorum_lost": sorted(self.quorum_lost),
            "to_evacuate": {n: list(q) for n, q in sorted(self.to_evacuate.items())},
            "stranded": sorted(self.stranded),
            "refused": sorted(self.refused),
            "evacuations": {u: dataclasses.asdict(e)
                            for u, e in sorted(self.evacuations.items())}}

    def restore(self, state: dict[str, Any]) -> None:
        """Take back ``state()`` of an earlier run; hosts, clusters and
        instances that are gone are dropped. ValueError for data that is
        not a planner state."""
        try:
            self.suspects = {n: _Suspect(**s) for n, s in
                             state.get("suspects", {}).items() if n in self.hosts}
            self.fenced = set(state.get("fenced", [])) & set(self.hosts)
            self.incidents = set(state.get("incidents", [])) & set(self.clusters)
            self.quorum_lost = set(state.get("quorum_lost", [])) & set(self.clusters)
            self.to_evacuate = {
                n: [u for u in q if self.placed.get(u) == n]
                for n, q in state.get("to_evacuate", {}).items() if n in self.hosts}
            self.stranded = set(state.get("stranded", [])) & set(self.instances)
            self.refused = set(state.get("refused", [])) & set(self.instances)
            self.evacuations = {
                u: _Evacuation(**e) for u, e in
                state.get("evacuations", {}).items() if e["source"] in self.hosts}
        except (TypeError, AttributeError, KeyError) as exc:
            raise ValueError(f"not a planner state: {exc}") from None

    # ----------------------------------------------------------- counting
    def quorum_size(self, cluster: str) -> int:
        return sum(1 for n in self.clusters[cluster] if self.hosts[n].quorum)

    def storage_live(self, cluster: str) -> int:
        """Quorum members up by the storage cluster's account and not
        taken down (or possibly being taken down) by a fence of ours."""
        return sum(1 for n in self.clusters[cluster]
                   if self.hosts[n].quorum and n not in self.storage_down
                   and n not in self.fenced
                   and not (n in self.suspects and self.suspects[n].unconfirmed))

    def healthy_quorum(self, cluster: str) -> int:
        """Quorum members that are healthy: no suspect counts."""
        return sum(1 for n in self.clusters[cluster]
                   if self.hosts[n].quorum and self.healthy(n))

    def healthy(self, name: str) -> bool:
        return (name not in self.suspects and name not in self.fenced
                and name not in self.storage_down)

    # -------------------------------------------------------------- input
    def _observe(self, now: float, suspects: set[str], down: set[str],
                 confirmed: set[str], out: list[Action]) -> None:
        unknown = sorted((suspects | down | confirmed) - set(self.hosts))
        if unknown:
            raise ValueError(f"unknown hosts: {', '.join(unknown)}")
        self.storage_down = set(down)
        for name in sorted(set(self.suspects) - suspects):
            self._recovered(now, name, confirmed, out)
        for name in sorted(suspects - set(self.suspects)):
            self.suspects[name] = _Suspect(since=now)
        for name in sorted(confirmed & set(self.suspects)):
            s = self.suspects[name]
            if name not in self.fenced:
                by_hand = not s.unconfirmed
                s.fencing = s.stuck = False
                self.fenced.add(name)
                self.to_evacuate[name] = sorted(
                    u for u, h in self.placed.items() if h == name)
                out.append(Action(now, "log", name, "fence confirmed"
                                  + (" by hand" if by_hand else "")))

    def _recovered(self, now: float, name: str, confirmed: set[str],
                   out: list[Action]) -> None:
        s = self.suspects.pop(name)
        notes = []
        if s.unconfirmed:
            notes.append(f"its {s.fence} is abandoned")
        if name in confirmed:
            notes.append("the fence confirmation of this tick is ignored")
        left = self.to_evacuate.pop(name, [])
        if left:
            notes.append(f"{len(left)} evacuation(s) dropped, those instances "
                         "stay on it")
        records = sorted(u for u, e in self.evacuations.items()
                         if e.source == name)
        for uuid in records:
            del self.evacuations[uuid]
        if records:
            notes.append(f"{len(records)} evacuation record(s) dropped")
        self.fenced.discard(name)
        out.append(Action(now, "log", name, "heartbeat back"
                          + (f"; {'; '.join(notes)}" if notes else "")))

    def tick(self, now: float, suspects: Iterable[str],
             storage_down: Iterable[str] = (),
             confirmed_fences: Iterable[str] = (),
             servers: Iterable[Instance] | None = None) -> list[Action]:
        """Actions to take at ``now`` (seconds), given the hosts whose
        heartbeat is lost, the hosts the storage cluster reports out of its
        quorum, and the fences confirmed since the last tick. ``servers``:
        every server as nova shows it now, to check the outcome of earlier
        evacuations; without it (a simulation) they are taken as done."""
        out: list[Action] = []
        if servers is None:
            self.evacuations = {u: e for u, e in self.evacuations.items()
                                if e.state != "in-flight"}
        else:
            self._see(list(servers))
            self._check_evacuations(now, out)
        self._observe(now, set(suspects), set(storage_down),
                      set(confirmed_fences), out)
        for cluster in sorted(self.clusters):
            for name in self._suspects_of(cluster):
                self._time_out_fence(now, name, out)
            halted = self._quorum_check(now, cluster, out)
            halted = self._brake(now, cluster, out) or halted
            if halted:
                continue
            for name in self._suspects_of(cluster):
                self._climb(now, cluster, name, out)
            self._evacuate(now, cluster, out)
        return out

    def _see(self, servers: list[Instance]) -> None:
        unknown = sorted({i.host for i in servers} - set(self.hosts))
        if unknown:
            raise ValueError(f"instances on unknown hosts: {', '.join(unknown)}")
        self.instances = {i.uuid: i for i in servers}
        self.placed = {i.uuid: i.host for i in servers}

    def _check_evacuations(self, now: float, out: list[Action]) -> None:
        """The outcome of each evacuation asked earlier, from the servers
        as nova shows them now."""
        for uuid, ev in sorted(self.evacuations.items()):
            inst = self.instances.get(uuid)
            if inst is None:
                del self.evacuations[uuid]
                out.append(Action(now, "log", ev.source, (
                    f"server {uuid} is gone; its evacuation is no longer "
                    "followed"), instance=uuid))
            elif inst.busy:
                continue            # nova is still at it
            elif inst.host != ev.source:
                del self.evacuations[uuid]
                if inst.status == "ERROR":
                    out.append(Action(now, "alert", ev.source, (
                        f"server {uuid} evacuated to {inst.host} but in ERROR "
                        "there: left for the operator"), instance=uuid))
                elif ev.state == "in-flight":
                    out.append(Action(now, "log", ev.source, (
                        f"server {uuid} evacuated to {inst.host} "
                        f"({inst.status})"), instance=uuid))
            elif ev.state == "in-flight":
                self._failed(now, uuid, (
                    f"the server is still on {ev.source} ({inst.status}) "
                    "with no task in progress"), out)

    def evacuation_failed(self, now: float, uuid: str, why: str) -> list[Action]:
        """Nova refused the evacuation of ``uuid`` asked at this tick (the
        request's error, ``why``): retried on a later tick, or given up."""
        out: list[Action] = []
        self._failed(now, uuid, why, out)
        return out

    def _failed(self, now: float, uuid: str, why: str,
                out: list[Action]) -> None:
        ev = self.evacuations[uuid]
        ev.error = why
        limit = self.policy.evacuation_attempts
        where = ev.destination or "a host of nova's scheduler"
        if ev.attempts < limit:
            ev.state = "retry"
            queue = self.to_evacuate.setdefault(ev.source, [])
            if uuid not in queue:
                queue.insert(0, uuid)
            out.append(Action(now, "evacuation-failed", ev.source, (
                f"server {uuid}: attempt {ev.attempts} of {limit} to {where}: {why}; "
                "retried on a later tick"), instance=uuid,
                destination=ev.destination))
        else:
            ev.state = "given-up"
            out.append(Action(now, "alert", ev.source, (
                f"evacuation of server {uuid} failed {ev.attempts} time(s) "
                f"(tried {', '.join(h or 'nova scheduler' for h in ev.tried)}; "
                f"last: {why}): not retried, left for the operator"),
                instance=uuid, destination=ev.destination))

    # ---------------------------------------------------- cluster halts
    def _quorum_check(self, now: float, cluster: str, out: list[Action]) -> bool:
        size = self.quorum_size(cluster)
        live = self.storage_live(cluster)
        lost = size > 0 and live < majority(size)
        if lost and cluster not in self.quorum_lost:
            self.quorum_lost.add(cluster)
            out.append(Action(now, "alert", cluster, (
                f"storage quorum lost: {live} of {size} quorum members up, "
                f"majority {majority(size)}; no fencing, no evacuation")))
        elif not lost and cluster in self.quorum_lost:
            self.quorum_lost.discard(cluster)
            out.append(Action(now, "log", cluster, "storage quorum back"))
        return lost

    def _brake(self, now: float, cluster: str, out: list[Action]) -> bool:
        members = self.clusters[cluster]
        suspect = [n for n in members if n in self.suspects]
        incident = bool(suspect) and \
            len(suspect) >= self.policy.brake_fraction * len(members)
        if incident and cluster not in self.incidents:
            self.incidents.add(cluster)
            out.append(Action(now, "alert", cluster, (
                f"storage incident: {len(suspect)} of {len(members)} hosts "
                f"suspect ({', '.join(suspect)}), at least "
                f"{self.policy.brake_fraction:.0%}; no fencing, no evacuation")))
        elif not incident and cluster in self.incidents:
            self.incidents.discard(cluster)
            out.append(Action(now, "log", cluster, "storage incident over"))
        return incident

    # ------------------------------------------------------------ ladder
    def _suspects_of(self, cluster: str) -> list[str]:
        names = [n for n in self.clusters[cluster] if n in self.suspects]
        return sorted(names, key=lambda n: (self.suspects[n].since, n))

    def _time_out_fence(self, now: float, name: str, out: list[Action]) -> None:
        s = self.suspects[name]
        if s.fencing and now - s.fence_at >= self.policy.fence_timeout:
            s.fencing, s.stuck = False, True
            out.append(Action(now, "alert", name, (
                f"{s.fence} issued at {s.fence_at:g} not "
                f"confirmed within {self.policy.fence_timeout:g} s: fence "
                "stuck; the host counts as down for the quorum and is not "
                "evacuated until a fence is confirmed")))

    def _fence_blocked(self, cluster: str, name: str) -> str:
        """Why a fence of ``name`` may not be issued now ("" if it may)."""
        in_flight = sum(1 for n in self.clusters[cluster] if n != name
                        and n in self.suspects and self.suspects[n].fencing)
        if in_flight >= self.policy.fence_batch:
            return f"{in_flight} fence(s) in flight (batch {self.policy.fence_batch})"
        counted = self.hosts[name].quorum and name not in self.storage_down \
            and not self.suspects[name].unconfirmed
        if counted:
            healthy = self.healthy_quorum(cluster)
            size = self.quorum_size(cluster)
            if healthy < majority(size):
                return (f"the storage still counts it, and only {healthy} of "
                        f"{size} quorum members are healthy, below the "
                        f"majority {majority(size)}"
                        + (" (a 2-node cluster never has one after a fence: "
                           "add a tie-breaker quorum member)" if size == 2
                           else ""))
        return ""

    def _defer(self, now: float, name: str, step: str, why: str,
               out: list[Action]) -> None:
        s = self.suspects[name]
        if s.deferred_since is None:
            s.deferred_since = now
        if s.deferred != why:
            s.deferred = why
            out.append(Action(now, "log", name, f"{step} deferred: {why}"))
        if not s.deferral_alerted and \
                now - s.deferred_since >= self.policy.fence_timeout:
            s.deferral_alerted = True
            out.append(Action(now, "alert", name, (
                f"{step} deferred for {now - s.deferred_since:g} s: {why}; "
                "not fenced, not evacuated: operator decision needed")))

    def _climb(self, now: float, cluster: str, name: str,
               out: list[Action]) -> None:
        s = self.suspects[name]
        ladder = self.policy.ladder
        if name in self.fenced or s.exhausted:
            return
        due = s.step < 0 or now - s.step_at >= self.policy.step_timeout
        if not due:
            return
        if s.step + 1 >= len(ladder):
            if s.fencing:
                return      # the last fence: confirmed, or timed out
            s.exhausted = True
            if ladder != ("log-only",) and not s.stuck:   # stuck: alerted
                out.append(Action(now, "alert", name, (
                    f"suspect since {s.since:g}; ladder exhausted without a "
                    "confirmed fence; not evacuated (confirm the fence by "
                    "hand to evacuate)")))
            return
        step = ladder[s.step + 1]
        if step in FENCES:
            why = self._fence_blocked(cluster, name)
            if why:
                self._defer(now, name, step, why, out)
                return
            s.fencing, s.fence, s.fence_at = True, step, now
        s.step, s.step_at = s.step + 1, now
        s.deferred, s.deferred_since, s.deferral_alerted = "", None, False
        kind = "log" if step == "log-only" else step
        out.append(Action(now, kind, name, f"suspect since {s.since:g}"))

    # -------------------------------------------------------- evacuation
    def _load(self, name: str) -> int:
        return sum(1 for h in self.placed.values() if h == name)

    def destination(self, uuid: str, named: bool = True) -> str | None:
        """The least-loaded healthy host (then by name) that can take the
        instance, in a cluster whose storage quorum holds: one of its
        storage domain when its disks are shared; a host an earlier attempt
        failed on only when no other is left. ``named``: nova is given the
        host, so a disk on a sharing provider needs one whose compute node
        offers DISK_GB (``in_tree`` leaves the sharing provider out)."""
        inst = self.instances[uuid]
        ev = self.evacuations.get(uuid)
        tried = set(ev.tried) if ev else set()
        source = self.hosts[inst.host]
        options = []
        for h in self.hosts.values():
            if h.name == inst.host or not self.healthy(h.name) \
                    or h.cluster in self.quorum_lost:
                continue
            if inst.domain is not None and inst.domain not in h.domains:
                continue
            if h.capacity is not None and self._load(h.name) >= h.capacity:
                continue
            if named and inst.sharing_disk and not h.node_disk:
                continue
            options.append(h)
        if not options:
            return None
        best = min(options, key=lambda h: (h.name in tried,
                                           h.cluster != source.cluster,
                                           self._load(h.name), h.name))
        return best.name

    def _unscheduled_risk(self, inst: Instance) -> str:
        """Why nova's scheduler may not choose the host of ``inst`` ("" when
        every host it could choose is healthy and of the instance's domain;
        its quorum holding)."""
        choosable = sorted(h.name for h in self.hosts.values()
                           if h.name != inst.host and h.schedulable)
        if not choosable:
            return "nova has no up and enabled compute service to choose"
        outside = [n for n in choosable
                   if inst.domain not in self.hosts[n].domains]
        if outside:
            return (f"nova's scheduler could choose {', '.join(outside)}, "
                    f"outside storage domain {inst.domain}, where its disk "
                    "is not")
        unsafe = [n for n in choosable if not self.healthy(n)
                  or self.hosts[n].cluster in self.quorum_lost]
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

    def _evacuate(self, now: float, cluster: str, out: list[Action]) -> None:
        budget = self.policy.evacuation_batch
        for name in self.clusters[cluster]:
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
                ev = self.evacuations.get(uuid)
                reason = scheduled or "fence confirmed"
                if ev is None:
                    self.evacuations[uuid] = _Evacuation(name, dest, now,
                                                         tried=[dest])
                else:
                    ev.attempts += 1
                    ev.destination, ev.at, ev.state = dest, now, "in-flight"
                    ev.tried.append(dest)
                    reason = (f"retry, attempt {ev.attempts} of "
                              f"{self.policy.evacuation_attempts}"
                              + (f"; {scheduled}" if scheduled else ""))
                out.append(Action(now, "evacuate", name, reason,
                                  instance=uuid, destination=dest))
            pending[:0] = held
