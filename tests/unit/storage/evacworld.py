"""A simulated world for the evacuation planner: hosts with a true
condition, a clock, and an executor that carries out the planner's
actions with fixed delays. Deterministic: no randomness, no wall clock.

Conditions:
* ``ok``: heartbeat fine;
* ``agent-hung``: heartbeat lost; ``restart-agent`` fixes it after 10 s;
* ``partitioned``: heartbeat lost (management network), still in the
  storage quorum; a graceful reboot is confirmed after 60 s and the host is
  back after 180 s; a hard reboot is confirmed after 5 s, back after 120 s;
* ``hung``: heartbeat lost, still in the storage quorum, a graceful reboot
  does nothing; a hard reboot as above;
* ``quick-reboot``: like ``partitioned``, but a graceful reboot is
  confirmed and the host back in the same tick (60 s later);
* ``dead``: heartbeat lost and out of the storage quorum; only a hard
  reboot (power off) is confirmed, after 5 s; it never comes back;
* ``storage-lost``: heartbeat fine, but out of the storage quorum (its
  storage daemon is down).

A host the planner does not act on may be confirmed fenced by hand:
``run(..., confirm={at: [host]})`` (the operator powered it off and forced
its compute service down).
"""

from __future__ import annotations

from scheduler_ext.storage.evacuation import (
    Action, ClusterHost, EvacuationPlanner, Instance, majority)
from scheduler_ext.storage.fencing_policy import Policy

TICK = 5.0


class World:
    def __init__(self, hosts: list[ClusterHost], instances: list[Instance],
                 policy: Policy, conditions: dict[str, str]):
        self.hosts = {h.name: h for h in hosts}
        self.condition = {h.name: "ok" for h in hosts}
        self.condition.update(conditions)
        self.powered_off: set[str] = set()        # by one of our fences
        self.events: list[tuple[float, str, str]] = []   # (at, kind, host)
        self.confirmed: set[str] = set()
        self.confirm_times: dict[str, float] = {}
        self.planner = EvacuationPlanner(hosts, instances, policy)
        self.instances = {i.uuid: i for i in instances}
        self.log: list[Action] = []
        self.now = 0.0
        self.violations: list[str] = []

    # ------------------------------------------------------------ facts
    def suspects(self) -> set[str]:
        return {n for n, c in self.condition.items()
                if c not in ("ok", "storage-lost")} | self.powered_off

    def storage_down(self) -> set[str]:
        return {n for n, c in self.condition.items()
                if c in ("dead", "storage-lost")} | self.powered_off

    def live_quorum(self, cluster: str) -> int:
        return sum(1 for h in self.hosts.values() if h.cluster == cluster
                   and h.quorum and h.name not in self.storage_down())

    # ---------------------------------------------------------- executor
    def _schedule(self, delay: float, kind: str, host: str) -> None:
        self.events.append((self.now + delay, kind, host))

    def execute(self, action: Action) -> None:
        cond = self.condition.get(action.host)
        if action.kind in ("graceful-reboot", "hard-reboot"):
            self._quorum_after_our_fence(action.host, "fence issued on")
        if action.kind == "restart-agent" and cond == "agent-hung":
            self._schedule(10, "recover", action.host)
        elif action.kind == "graceful-reboot" and cond == "partitioned":
            self._schedule(60, "off", action.host)
            self._schedule(180, "back", action.host)
        elif action.kind == "graceful-reboot" and cond == "quick-reboot":
            self._schedule(60, "off", action.host)
            self._schedule(60, "back", action.host)
        elif action.kind == "hard-reboot":
            self._schedule(5, "off", action.host)
            if cond != "dead":
                self._schedule(120, "back", action.host)
        elif action.kind == "evacuate":
            inst = self.instances[action.instance]
            dest = self.hosts[action.destination]
            if action.host not in self.confirm_times:
                self.violations.append(f"{self.now}: evacuated {inst.uuid} "
                                       f"from unfenced {action.host}")
            if inst.domain is not None and inst.domain not in dest.domains:
                self.violations.append(f"{self.now}: {inst.uuid} left its "
                                       f"domain for {dest.name}")
            cluster = self.hosts[action.host].cluster
            size = sum(1 for h in self.hosts.values()
                       if h.cluster == cluster and h.quorum)
            if size and self.live_quorum(cluster) < majority(size):
                self.violations.append(f"{self.now}: evacuated {inst.uuid} "
                                       f"while cluster {cluster} has lost "
                                       "its storage quorum")
            if dest.name in self.suspects():
                self.violations.append(f"{self.now}: {inst.uuid} sent to "
                                       f"suspect {dest.name}")

    def _due_events(self) -> None:
        for event in sorted((e for e in self.events if e[0] <= self.now),
                            key=lambda e: (e[0], e[1] == "back")):
            self.events.remove(event)
            _, kind, host = event
            if kind == "recover":
                self.condition[host] = "ok"
            elif kind == "off":
                self.powered_off.add(host)
                self._quorum_after_our_fence(host, "our fence powered off")
                self.confirmed.add(host)
                self.confirm_times[host] = self.now
            elif kind == "back":
                self.powered_off.discard(host)
                self.condition[host] = "ok"

    def _quorum_after_our_fence(self, host: str, what: str) -> None:
        cluster = self.hosts[host].cluster
        members = [h for h in self.hosts.values()
                   if h.cluster == cluster and h.quorum]
        if members and self.live_quorum(cluster) < majority(len(members)):
            self.violations.append(
                f"{self.now}: {what} {host} with cluster {cluster} at "
                f"{self.live_quorum(cluster)} live quorum members of "
                f"{len(members)}")

    # -------------------------------------------------------------- run
    def run(self, until: float, changes: dict[float, dict[str, str]] | None = None,
            confirm: dict[float, list[str]] | None = None) -> list[Action]:
        """Tick every 5 s up to ``until``; ``changes`` sets conditions at
        given times, ``confirm`` confirms fences by hand."""
        while self.now <= until:
            for host, cond in (changes or {}).get(self.now, {}).items():
                self.condition[host] = cond
            for host in (confirm or {}).get(self.now, []):
                self.powered_off.add(host)
                self.confirmed.add(host)
                self.confirm_times[host] = self.now
            self._due_events()
            actions = self.planner.tick(self.now, self.suspects(),
                                        self.storage_down(), self.confirmed)
            self.confirmed = set()
            for action in actions:
                self.execute(action)
            self.log += actions
            self.now += TICK
        return self.log


def hci(name: str, size: int, domain: str | None = None) -> list[ClusterHost]:
    """A hyper-converged cluster: every host a quorum member on one domain."""
    domain = domain or f"gpfs:{name}:/instances"
    return [ClusterHost(f"{name}-{i}", name, True, frozenset([domain]))
            for i in range(1, size + 1)]


def servers(hosts: list[ClusterHost], per_host: int = 2) -> list[Instance]:
    return [Instance(f"{h.name}-vm{j}", h.name, next(iter(h.domains)))
            for h in hosts for j in range(per_host)]


def kinds(log: list[Action], host: str) -> list[str]:
    return [a.kind for a in log if a.host == host and a.kind != "evacuate"]
