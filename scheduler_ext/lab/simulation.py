"""The simulation behind ``scheduler-ext simulate``: servers booted, resized,
migrated, confirmed, reverted, failed and deleted the way nova's conductor
and compute do it (``nova_model``), with the invariants checked at every
step. The command's options and output are in ``scheduler_ext.cmd.simulate``.

Cost per step is what the step touched, not the fleet's size:

* the invariants are checked on the providers and consumers the step wrote
  (the embedded placement's change feed) and the servers it acted on; a full
  check runs every ``full_check_every`` steps and at the end (on a placement
  without a change feed, such as a real one, every step is a full check);
* the engine re-reads only the providers the feed names;
* the periodic reconcile looks at the servers whose moves changed since its
  last run, as nova's scheduler service does; the last one looks at all.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid as uuidlib
from typing import Any, Callable

from scheduler_ext import driver as se_driver
from scheduler_ext import errors
from scheduler_ext.lab import fleet, invariants
from scheduler_ext.lab.nova_model import NovaModel
from scheduler_ext.lab.tally import IndexedSet, Tally
from scheduler_ext.moves.reconcile import Reconciler
from scheduler_ext.placement import Inventory, PlacementClient
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.client import ChangeFeed
from scheduler_ext.sources.changes import FeedChanges
from scheduler_ext.sources.fleet_view import FleetView

FLAVORS = {
    "small": {"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 40},
    "medium": {"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80},
    "large": {"VCPU": 8, "MEMORY_MB": 16384, "DISK_GB": 160},
    "xlarge": {"VCPU": 16, "MEMORY_MB": 30000, "DISK_GB": 320},
}
#: weights of the random operations
OPERATIONS = {"resize": 30, "migrate": 10, "finish": 30, "fail": 8,
              "delete": 6, "boot": 10, "reconcile": 6}
#: a full invariant check every this many steps (and always at the end)
FULL_CHECK_EVERY = 25_000
#: timeline samples per run (about)
SAMPLES = 200
#: DISK_GB of one sharing provider per compute node it serves (the
#: fleet's local disk size), and never less than fleet.build's default
SHARED_DISK_PER_HOST = 2000


def uuid_factory(rng: random.Random) -> Callable[[], str]:
    return lambda: str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


def check(client: PlacementClient, model: NovaModel, tally: Tally,
          exact: bool, step: str) -> None:
    """A full check: every provider, consumer and server."""
    consumers: set[str] = set()
    problems = invariants.check_providers(client, consumers)
    problems += invariants.check_consumers(client, sorted(consumers), model.owner_of)
    problems += invariants.check_servers(client, model.states(), exact)
    tally.checks["full"] += 1
    for v in problems:
        tally.violation(f"after {step}: {v}")


def run_bug_1790204(strategy: str) -> Tally:
    """nova's regression case: one host, a server resized 1 -> 2 vCPU."""
    tally = Tally()
    client = EmbeddedPlacement()
    fleet.add_host(client, "host1", {"VCPU": Inventory(2),
                                     "MEMORY_MB": Inventory(8192),
                                     "DISK_GB": Inventory(1028)})
    drv = se_driver.SchedulerDriver(client, se_driver.make_conf(
        move_strategy=strategy))
    model = NovaModel(client, drv.select_destinations)
    server = model.boot({"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 1028})
    tally.counts["boot ok"] += 1
    try:
        move = model.resize(server.uuid, {"VCPU": 2, "MEMORY_MB": 2048,
                                          "DISK_GB": 1028})
    except errors.NoValidHost as exc:
        tally.counts["resize failed"] += 1
        tally.counts["resize same host failed"] += 1
        tally.counts["last error"] = str(exc)  # type: ignore[assignment]
    else:
        tally.counts["resize ok"] += 1
        tally.counts["resize same host ok"] += move.source == move.dest
        check(client, model, tally, strategy == "same_host", "resize")
        model.confirm(server.uuid)
        tally.counts["confirm ok"] += 1
        tally.counts["reconcile fixes"] += sum(
            f.applied for f in Reconciler(client).run(model.states(), apply=True))
    check(client, model, tally, strategy == "same_host", "the scenario")
    return tally


class Run:
    """What every simulated run shares: a placement, nova's model of it, the
    tally, the touched-set and full checks, the reconcile of the servers
    whose moves changed, and the timeline. Subclasses build the fleet and
    define ``step``."""

    def __init__(self, client: PlacementClient | None, seed: int,
                 full_check_every: int = FULL_CHECK_EVERY):
        self.rng = random.Random(seed)
        self.tally = Tally()
        self.client = client if client is not None else EmbeddedPlacement()
        self.model = NovaModel(self.client, self._no_scheduler,
                               uuid_factory=uuid_factory(random.Random(seed + 1)))
        self.reconciler = Reconciler(self.client)
        self.exact = False
        self.full_check_every = full_check_every
        self.dirty: set[str] = set()    # moves changed since the last reconcile
        self.pending: set[str] = set()  # holding more than their live flavor
        self.reconciled: list[str] = []  # servers the last reconcile looked at
        self.checker: invariants.TouchedChecker | None = None

    @staticmethod
    def _no_scheduler(request: Any) -> Any:
        raise RuntimeError("use_strategy() first")

    def use_strategy(self, strategy: str) -> None:
        """Schedule with ``strategy`` (``same_host`` or ``stock``) from now on."""
        drv = se_driver.SchedulerDriver(self.client, se_driver.make_conf(
            move_strategy=strategy))
        self.model.scheduler = drv.select_destinations
        view = drv.upkeep
        if isinstance(view, FleetView) and not isinstance(view.source, FeedChanges):
            # a real placement hides decreases from the view's poll (see
            # sources.fleet_view); runs compared decision for decision
            # across backends need the exact view each time
            def select(*args: Any, **kwargs: Any) -> Any:
                view.reread()
                return drv.select_destinations(*args, **kwargs)
            self.model.scheduler = select
        self.exact = strategy == "same_host"

    def attempt(self, op: str, fn: Callable, *a: Any) -> Any:
        """``fn(*a)``, counted as ``op`` ok or failed (NoValidHost)."""
        try:
            result = fn(*a)
        except errors.NoValidHost:
            self.tally.counts[op + " failed"] += 1
            return None
        self.tally.counts[op + " ok"] += 1
        return result

    def step(self, step: int) -> None:
        """One operation, then ``after``."""
        raise NotImplementedError

    def reconcile_dirty(self) -> None:
        """nova's periodic reconcile: the servers whose moves changed."""
        states = [s for s in map(self.model.state_of, sorted(self.dirty))
                  if s is not None]
        self.tally.counts["reconcile fixes"] += sum(
            f.applied for f in self.reconciler.run(states, apply=True))
        self.reconciled = [s.uuid for s in states]
        self.dirty.clear()

    def after(self, step: int, op: str, acted: list[str], exact: bool) -> None:
        """The invariants after ``step``: on what it touched, and in full
        every ``full_check_every`` steps; then a timeline sample."""
        label = f"step {step} ({op})"
        if self.checker is None:
            check(self.client, self.model, self.tally, exact, label)
        else:
            self.tally.checks["touched"] += 1
            problems, states = self.checker.check(acted, exact)
            for v in problems:
                self.tally.violation(f"after {label}: {v}")
            for s in states:
                if invariants.holds_more_than_flavor(self.client, s):
                    self.pending.add(s.uuid)
                else:
                    self.pending.discard(s.uuid)
            if self.full_check_every and (step + 1) % self.full_check_every == 0:
                check(self.client, self.model, self.tally, False, label)
        for uuid in acted:
            if uuid not in self.model.servers:
                self.pending.discard(uuid)
                self.dirty.discard(uuid)

    def start(self) -> None:
        """After the fill: a full check, then touched-set checks (when the
        placement has a change feed). ``run`` calls it unless done before
        (once for every strategy run from one fill)."""
        check(self.client, self.model, self.tally, False, "the fill")
        if isinstance(self.client, ChangeFeed):
            self.checker = invariants.TouchedChecker(
                self.client, self.model.owner_of, self.model.state_of)

    def sample(self, step: int) -> None:
        """One timeline point: cumulative resize and same-host counts,
        fleet utilisation per class, servers awaiting a reconcile."""
        ok, tried = self.tally.ratio("resize")
        self.tally.timeline.append({
            "step": step, "resize_ok": ok, "resize_attempted": tried,
            "resize_same_host_ok": self.tally.counts["resize same host ok"],
            "servers": len(self.model.servers),
            "utilisation": self.checker.utilisation() if self.checker else {},
            "awaiting_reconcile": len(self.pending)})

    def finish(self) -> Tally:
        """End every move, then reconcile every server: nothing may be left
        over (a full, exact check for our strategy)."""
        for u in sorted(self.model.servers):
            if self.model.servers[u].active:
                self.model.confirm(u)
        self.tally.counts["reconcile fixes"] += sum(
            f.applied for f in self.reconciler.run(self.model.states(), apply=True))
        check(self.client, self.model, self.tally, self.exact, "the final reconcile")
        self.tally.final = invariants.state(self.client)
        return self.tally

    def run(self, steps: int, progress: Callable[[int], None] | None = None) -> Tally:
        """``steps`` random operations (after ``fill`` and
        ``use_strategy``), then ``finish``. ``progress(n)`` is called with
        the steps done, about every 1% of the run."""
        started = time.monotonic()
        if self.checker is None:
            self.start()
        every = max(1, steps // SAMPLES)
        tick = max(1, steps // 100)
        self.sample(0)
        for step in range(steps):
            self.step(step)
            if (step + 1) % every == 0 or step + 1 == steps:
                self.sample(step + 1)
            if progress is not None and ((step + 1) % tick == 0 or step + 1 == steps):
                progress(step + 1)
        tally = self.finish()
        tally.seconds = time.monotonic() - started
        return tally


class RandomRun(Run):
    """The random scenario on ``client``: a fleet of ``hosts`` compute nodes
    and ``sharing`` sharing storage providers, filled with servers
    (``fill``), then one seeded random operation per ``step`` under the
    strategy given to ``use_strategy``."""

    def __init__(self, hosts: int, sharing: int, seed: int,
                 client: PlacementClient | None = None,
                 full_check_every: int = FULL_CHECK_EVERY):
        super().__init__(client, seed, full_check_every)
        per_pool = -(-hosts // (2 * sharing)) if sharing else 0
        self.fleet = fleet.build(
            self.client, hosts=hosts, sharing=sharing, seed=seed,
            shared_disk_gb=max(20000, SHARED_DISK_PER_HOST * per_pool))
        self.names = sorted(FLAVORS)
        self.still: IndexedSet[str] = IndexedSet()     # no move in progress
        self.moving: IndexedSet[str] = IndexedSet()    # a move in progress
        self.cum_weights = list(itertools.accumulate(OPERATIONS.values()))

    def flavor(self) -> dict[str, int]:
        return FLAVORS[self.rng.choice(self.names)]

    def fill(self, misses_per_host: int = 3) -> int:
        """Give every compute node servers of random flavors until
        ``misses_per_host`` have not fitted there, each claimed directly on
        the node (and its sharing provider for DISK_GB when the node has no
        disk). Returns the number of servers."""
        sharing_of = {agg: rp for rp, agg in self.fleet.aggregates.items()}
        for host in self.fleet.hosts:
            _, invs = self.client.get_inventories(host)
            _, aggs = self.client.get_aggregates(host)
            disk_rp = host if "DISK_GB" in invs else next(
                (sharing_of[a] for a in sorted(aggs) if a in sharing_of), None)
            misses = 0
            while misses < misses_per_host:
                flavor = self.flavor()
                allocs: dict[str, dict[str, int]] = {host: {
                    rc: n for rc, n in flavor.items() if rc != "DISK_GB"}}
                if disk_rp is not None:
                    allocs.setdefault(disk_rp, {})["DISK_GB"] = flavor["DISK_GB"]
                try:
                    server = self.model.place(flavor, allocs, host)
                except errors.Conflict:
                    misses += 1
                    continue
                self.still.add(server.uuid)
        self.tally.counts["servers placed by the fill"] = len(self.model.servers)
        return len(self.model.servers)

    # -------------------------------------------------------------- steps
    def _file(self, server_uuid: str) -> None:
        """Keep the server in the set matching its state."""
        server = self.model.servers.get(server_uuid)
        self.still.discard(server_uuid)
        self.moving.discard(server_uuid)
        if server is not None:
            (self.moving if server.active else self.still).add(server_uuid)

    def _any(self) -> str:
        i = self.rng.randrange(len(self.still) + len(self.moving))
        return (self.still.items[i] if i < len(self.still)
                else self.moving.items[i - len(self.still)])

    def step(self, step: int) -> None:
        """One random operation, then the invariants on what it touched."""
        model, rng, counts = self.model, self.rng, self.tally.counts
        op = rng.choices(list(OPERATIONS), cum_weights=self.cum_weights)[0]
        acted: list[str] = []
        if op in ("resize", "migrate") and self.still:
            uuid = self.still.choice(rng)
            move = (self.attempt("resize", model.resize, uuid, self.flavor())
                    if op == "resize" else self.attempt("migrate", model.migrate, uuid))
            if op == "resize" and move is not None and move.source == move.dest:
                counts["resize same host ok"] += 1
            acted = [uuid]
        elif op == "finish" and self.moving:
            uuid = self.moving.choice(rng)
            confirm = rng.random() < 0.6
            (model.confirm if confirm else model.revert)(uuid)
            counts[("confirm" if confirm else "revert") + " ok"] += 1
            acted = [uuid]
        elif op == "fail" and self.moving:
            uuid = self.moving.choice(rng)
            new = model.fail_on_destination(uuid)
            counts["reschedule " + ("ok" if new else "failed")] += 1
            acted = [uuid]
        elif op == "delete" and (self.still or self.moving):
            uuid = self._any()
            model.delete(uuid)
            counts["delete ok"] += 1
            acted = [uuid]
        elif op == "boot":
            server = self.attempt("boot", model.boot, self.flavor())
            acted = [server.uuid] if server is not None else []
        elif op == "reconcile":
            self.reconcile_dirty()
            self.after(step, op, self.reconciled, self.exact)
            return
        for uuid in acted:
            self._file(uuid)
            if op != "boot":
                self.dirty.add(uuid)
        self.after(step, op, acted, False)

def run_random(strategy: str, hosts: int, sharing: int, steps: int, seed: int,
               client: PlacementClient | None = None,
               full_check_every: int = FULL_CHECK_EVERY,
               progress: Callable[[int], None] | None = None) -> Tally:
    """The random scenario (see ``RandomRun``) on ``client`` (a fresh
    embedded placement by default; it must hold no providers)."""
    sim = RandomRun(hosts, sharing, seed, client, full_check_every)
    sim.fill()
    sim.use_strategy(strategy)
    return sim.run(steps, progress)
