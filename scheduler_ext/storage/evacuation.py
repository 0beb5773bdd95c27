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
* Every evacuation's outcome is followed and a failed one retried, and a
  disk on a sharing provider is never named to a compute node without
  DISK_GB: ``evacuation_moves`` (the queue of evacuations).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from scheduler_ext.storage.evacuation_model import (
    Action, ClusterHost, Instance, majority)
from scheduler_ext.storage.evacuation_moves import EvacuationQueue
from scheduler_ext.storage.fencing_policy import FENCES, Policy

__all__ = ["Action", "ClusterHost", "EvacuationPlanner", "Instance",
           "majority"]

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
        self.quorum_lost: set[str] = set()
        self.queue = EvacuationQueue(self, instances)
        self.suspects: dict[str, _Suspect] = {}
        self.fenced: set[str] = set()
        self.storage_down: set[str] = set()
        self.incidents: set[str] = set()

    # -------------------------------------------------------------- state
    def state(self) -> dict[str, Any]:
        """What the planner remembers between ticks, as JSON-able data (a
        command run once per tick keeps it in a file)."""
        return {
            "suspects": {n: dataclasses.asdict(s)
                         for n, s in sorted(self.suspects.items())},
            "fenced": sorted(self.fenced), "incidents": sorted(self.incidents),
            "quorum_lost": sorted(self.quorum_lost), **self.queue.state()}

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
            self.queue.restore(state)
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
                self.queue.host_fenced(name)
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
        notes += self.queue.host_back(name)
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
            self.queue.trust_earlier()
        else:
            self.queue.see(list(servers))
            self.queue.check(now, out)
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
            self.queue.evacuate(now, cluster, out)
        return out

    def evacuation_failed(self, now: float, uuid: str, why: str) -> list[Action]:
        """Nova refused the evacuation of ``uuid`` asked at this tick (the
        request's error, ``why``): retried on a later tick, or given up."""
        out: list[Action] = []
        self.queue.failed(now, uuid, why, out)
        return out

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
