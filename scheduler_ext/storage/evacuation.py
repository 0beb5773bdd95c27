"""Quorum-safe fencing and evacuation for hosts on clustered storage.

On hyper-converged clusters (the compute hosts are also the storage
cluster's members) fencing several hosts at once can destroy the storage
quorum and turn one sick host into a whole-cluster outage. This planner
decides, tick by tick on a clock the caller provides, what to do with
suspect hosts (their heartbeat is lost):

* Hosts are grouped by storage cluster; the cluster's quorum members are
  marked. A quorum member counts as *live* unless it is fenced (until it is
  seen healthy again), being fenced, or reported down by the storage
  cluster itself. A fence of a live quorum member is only issued if the
  live members left are still a strict majority of the quorum members.
* At most ``fence_batch`` fences are in flight per cluster.
* Mass-failure brake: when more than ``brake_fraction`` of a cluster's hosts
  are suspect, it is a storage incident, not host failures: one alert, no
  fencing and no evacuation in that cluster until it is over.
* Each suspect host climbs the action ladder (``log-only``,
  ``restart-agent``, ``graceful-reboot``, ``hard-reboot``, configurable),
  one step per ``step_timeout`` seconds while it stays suspect. The reboots
  are fences: they count only when the caller confirms them.
* A host's instances are evacuated only after its fence is confirmed, at
  most ``evacuation_batch`` per cluster per tick. An instance whose disks
  are on shared storage goes to a healthy host of the same storage domain
  (its disks are there); one with local disks to any healthy host.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

LADDER_STEPS = ("log-only", "restart-agent", "graceful-reboot", "hard-reboot")
FENCES = ("graceful-reboot", "hard-reboot")


@dataclasses.dataclass(frozen=True)
class Policy:
    ladder: tuple[str, ...] = ("restart-agent", "graceful-reboot", "hard-reboot")
    step_timeout: float = 300.0
    brake_fraction: float = 0.5
    fence_batch: int = 1
    evacuation_batch: int = 10

    def __post_init__(self) -> None:
        bad = [s for s in self.ladder if s not in LADDER_STEPS]
        if not self.ladder or bad:
            raise ValueError(f"ladder {self.ladder!r}: steps are "
                             f"{', '.join(LADDER_STEPS)}")
        if "log-only" in self.ladder and len(self.ladder) > 1:
            raise ValueError("log-only is a ladder of its own")
        if list(self.ladder) != sorted(self.ladder, key=LADDER_STEPS.index):
            raise ValueError(f"ladder {self.ladder!r} must climb in the order "
                             f"{', '.join(LADDER_STEPS)}")
        if not 0 < self.brake_fraction <= 1 or self.step_timeout <= 0 or \
                self.fence_batch < 1 or self.evacuation_batch < 1:
            raise ValueError("brake_fraction in (0, 1], step_timeout > 0, "
                             "batches >= 1")


def policy_from_conf(conf: Any) -> Policy:
    """The policy of ``[storage]`` (a ConfigOpts with our options)."""
    opts = conf.storage
    return Policy(tuple(opts.fence_ladder), opts.fence_step_timeout,
                  opts.brake_fraction, opts.fence_batch, opts.evacuation_batch)


@dataclasses.dataclass(frozen=True)
class ClusterHost:
    name: str
    cluster: str
    quorum: bool = True
    domains: frozenset[str] = frozenset()
    capacity: int | None = None       # instances it can take; None: no limit


@dataclasses.dataclass(frozen=True)
class Instance:
    uuid: str
    host: str
    domain: str | None = None         # storage domain of its disks, if shared


@dataclasses.dataclass(frozen=True)
class Action:
    """``kind``: log, alert, restart-agent, graceful-reboot, hard-reboot or
    evacuate (``instance`` to ``destination``)."""

    at: float
    kind: str
    host: str
    reason: str = ""
    instance: str | None = None
    destination: str | None = None


@dataclasses.dataclass
class _Suspect:
    since: float
    step: int = -1             # index in the ladder of the last step taken
    step_at: float = 0.0
    fencing: bool = False      # a fence issued and not yet confirmed
    deferred: str = ""         # the reason last logged for a deferred fence
    exhausted: bool = False


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
        self.placed = {i.uuid: i.host for i in instances}
        self.instances = {i.uuid: i for i in instances}
        unknown = sorted({h for h in self.placed.values() if h not in self.hosts})
        if unknown:
            raise ValueError(f"instances on unknown hosts: {', '.join(unknown)}")
        self.suspects: dict[str, _Suspect] = {}
        self.fenced: set[str] = set()
        self.storage_down: set[str] = set()
        self.incidents: set[str] = set()
        self.to_evacuate: dict[str, list[str]] = {}
        self.stranded: set[str] = set()     # alerted: no destination

    # ----------------------------------------------------------- counting
    def live_quorum(self, cluster: str) -> int:
        """Quorum members neither fenced, being fenced, nor down."""
        return sum(1 for n in self.clusters[cluster]
                   if self.hosts[n].quorum and self._counts_live(n))

    def quorum_size(self, cluster: str) -> int:
        return sum(1 for n in self.clusters[cluster] if self.hosts[n].quorum)

    def _counts_live(self, name: str) -> bool:
        s = self.suspects.get(name)
        return not (name in self.fenced or name in self.storage_down
                    or (s is not None and s.fencing))

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
        for name in sorted(confirmed):
            s = self.suspects.get(name)
            if s is not None and s.fencing:
                s.fencing = False
                self.fenced.add(name)
                self.to_evacuate[name] = sorted(
                    u for u, h in self.placed.items() if h == name)
                out.append(Action(now, "log", name, "fence confirmed"))
        for name in sorted(set(self.suspects) - suspects):
            if not self.suspects[name].fencing:
                del self.suspects[name]
                self.fenced.discard(name)
                out.append(Action(now, "log", name, "heartbeat back"))
        for name in sorted(suspects - set(self.suspects)):
            if name not in self.fenced:
                self.suspects[name] = _Suspect(since=now)

    def tick(self, now: float, suspects: Iterable[str],
             storage_down: Iterable[str] = (),
             confirmed_fences: Iterable[str] = ()) -> list[Action]:
        """Actions to take at ``now`` (seconds), given the hosts whose
        heartbeat is lost, the hosts the storage cluster reports out of its
        quorum, and the fences confirmed since the last tick."""
        out: list[Action] = []
        self._observe(now, set(suspects), set(storage_down),
                      set(confirmed_fences), out)
        for cluster in sorted(self.clusters):
            if self._brake(now, cluster, out):
                continue
            for name in self._suspects_of(cluster):
                self._climb(now, cluster, name, out)
            self._evacuate(now, cluster, out)
        return out

    # ------------------------------------------------------------- brake
    def _brake(self, now: float, cluster: str, out: list[Action]) -> bool:
        members = self.clusters[cluster]
        suspect = [n for n in members if n in self.suspects]
        incident = len(suspect) > self.policy.brake_fraction * len(members)
        if incident and cluster not in self.incidents:
            self.incidents.add(cluster)
            out.append(Action(now, "alert", cluster, (
                f"storage incident: {len(suspect)} of {len(members)} hosts "
                f"suspect ({', '.join(suspect)}), more than "
                f"{self.policy.brake_fraction:.0%}; no fencing, no evacuation")))
        elif not incident and cluster in self.incidents:
            self.incidents.discard(cluster)
            out.append(Action(now, "log", cluster, "storage incident over"))
        return incident

    # ------------------------------------------------------------ ladder
    def _suspects_of(self, cluster: str) -> list[str]:
        names = [n for n in self.clusters[cluster] if n in self.suspects]
        return sorted(names, key=lambda n: (self.suspects[n].since, n))

    def _fence_blocked(self, cluster: str, name: str) -> str:
        """Why a fence of ``name`` may not be issued now ("" if it may)."""
        in_flight = sum(1 for n in self.clusters[cluster] if n != name
                        and n in self.suspects and self.suspects[n].fencing)
        if in_flight >= self.policy.fence_batch:
            return f"{in_flight} fence(s) in flight (batch {self.policy.fence_batch})"
        if self.hosts[name].quorum and self._counts_live(name):
            left = self.live_quorum(cluster) - 1
            need = majority(self.quorum_size(cluster))
            if left < need:
                return (f"fencing it would leave {left} live quorum members "
                        f"of {self.quorum_size(cluster)}, below the majority "
                        f"{need}")
        return ""

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
            if ladder != ("log-only",):
                s.exhausted = True
                out.append(Action(now, "alert", name, (
                    f"suspect since {s.since:g}; ladder exhausted without a "
                    "confirmed fence; not evacuated")))
            return
        step = ladder[s.step + 1]
        if step in FENCES:
            why = self._fence_blocked(cluster, name)
            if why:
                if s.deferred != why:
                    s.deferred = why
                    out.append(Action(now, "log", name, f"{step} deferred: {why}"))
                return
            s.fencing = True
        s.step, s.step_at, s.deferred = s.step + 1, now, ""
        kind = "log" if step == "log-only" else step
        out.append(Action(now, kind, name, f"suspect since {s.since:g}"))

    # -------------------------------------------------------- evacuation
    def _load(self, name: str) -> int:
        return sum(1 for h in self.placed.values() if h == name)

    def destination(self, uuid: str) -> str | None:
        """The least-loaded healthy host (then by name) that can take the
        instance: one of its storage domain when its disks are shared."""
        inst = self.instances[uuid]
        source = self.hosts[inst.host]
        options = []
        for h in self.hosts.values():
            if h.name == inst.host or not self.healthy(h.name):
                continue
            if inst.domain is not None and inst.domain not in h.domains:
                continue
            if h.capacity is not None and self._load(h.name) >= h.capacity:
                continue
            options.append(h)
        if not options:
            return None
        best = min(options, key=lambda h: (h.cluster != source.cluster,
                                           self._load(h.name), h.name))
        return best.name

    def _evacuate(self, now: float, cluster: str, out: list[Action]) -> None:
        budget = self.policy.evacuation_batch
        for name in self.clusters[cluster]:
            pending = self.to_evacuate.get(name, [])
            while pending and budget:
                uuid = pending[0]
                dest = self.destination(uuid)
                if dest is None:
                    inst = self.instances[uuid]
                    if uuid not in self.stranded:
                        self.stranded.add(uuid)
                        out.append(Action(now, "alert", name, (
                            f"no healthy destination for instance {uuid}"
                            + (f" in storage domain {inst.domain}"
                               if inst.domain else "")), instance=uuid))
                    break
                pending.pop(0)
                self.stranded.discard(uuid)
                budget -= 1
                self.placed[uuid] = dest
                out.append(Action(now, "evacuate", name, "fence confirmed",
                                  instance=uuid, destination=dest))
