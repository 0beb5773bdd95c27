"""The simulation behind ``scheduler-ext simulate``: servers booted, resized,
migrated, confirmed, reverted, failed and deleted the way nova's conductor
and compute do it (``nova_model``), with invariants checked after every
step. The command's options and output are in ``scheduler_ext.cmd.simulate``.
"""

from __future__ import annotations

import collections
import random
import uuid as uuidlib
from typing import Any, Callable

from scheduler_ext import driver as se_driver
from scheduler_ext import errors
from scheduler_ext.lab import fleet, invariants
from scheduler_ext.lab.nova_model import NovaModel
from scheduler_ext.moves.reconcile import Reconciler
from scheduler_ext.placement import EmbeddedPlacement, Inventory, PlacementClient

FLAVORS = {
    "small": {"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 40},
    "medium": {"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80},
    "large": {"VCPU": 8, "MEMORY_MB": 16384, "DISK_GB": 160},
    "xlarge": {"VCPU": 16, "MEMORY_MB": 30000, "DISK_GB": 320},
}


class Tally:
    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()
        self.violations: list[str] = []
        self.final: tuple | None = None

    def line(self, name: str) -> str:
        c = self.counts
        ops = ("boot", "resize", "resize same host", "migrate", "confirm",
               "revert", "reschedule", "delete", "reconcile fixes")
        parts = [f"{op} {c[op + ' ok']}/{c[op + ' ok'] + c[op + ' failed']}"
                 if op != "reconcile fixes" else f"{op} {c[op]}" for op in ops]
        return f"{name:>10}: " + ", ".join(parts)


def uuid_factory(rng: random.Random):
    return lambda: str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


def check(client, model, tally: Tally, exact: bool, step: str) -> None:
    for v in invariants.check_providers(client) + invariants.check_servers(
            client, model.states(), exact):
        tally.violations.append(f"after {step}: {v}")


def run_bug_1790204(strategy: str) -> Tally:
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


#: weights of the random operations
OPERATIONS = {"resize": 30, "migrate": 10, "finish": 30, "fail": 8,
              "delete": 6, "boot": 10, "reconcile": 6}


class RandomRun:
    """The random scenario on ``client``: a fleet of ``hosts`` compute nodes
    and ``sharing`` sharing storage providers, filled with servers, then
    one seeded random operation per ``step``."""

    def __init__(self, strategy: str, hosts: int, sharing: int, seed: int,
                 client: PlacementClient | None = None):
        self.rng = random.Random(seed)
        self.tally = Tally()
        self.client = client if client is not None else EmbeddedPlacement()
        fleet.build(self.client, hosts=hosts, sharing=sharing, seed=seed)
        drv = se_driver.SchedulerDriver(self.client, se_driver.make_conf(
            move_strategy=strategy))
        self.model = NovaModel(self.client, drv.select_destinations,
                               uuid_factory=uuid_factory(random.Random(seed + 1)))
        self.reconciler = Reconciler(self.client)
        self.exact = strategy == "same_host"
        self.names = sorted(FLAVORS)

    def attempt(self, op: str, fn: Callable, *a: Any) -> Any:
        """``fn(*a)``, counted as ``op`` ok or failed (NoValidHost)."""
        try:
            result = fn(*a)
        except errors.NoValidHost:
            self.tally.counts[op + " failed"] += 1
            return None
        self.tally.counts[op + " ok"] += 1
        return result

    def flavor(self) -> dict[str, int]:
        return FLAVORS[self.rng.choice(self.names)]

    def fill(self) -> None:
        """Boot servers until five boots in all have not fitted."""
        misses = 0
        while misses < 5:
            if self.attempt("boot", self.model.boot, self.flavor()) is None:
                misses += 1

    def step(self, step: int) -> None:
        """One random operation, then the invariants."""
        model, rng, counts = self.model, self.rng, self.tally.counts
        servers = sorted(model.servers)
        moving = [u for u in servers if model.servers[u].active]
        still = [u for u in servers if not model.servers[u].active]
        op = rng.choices(list(OPERATIONS), list(OPERATIONS.values()))[0]
        if op == "resize" and still:
            server = model.servers[rng.choice(still)]
            move = self.attempt("resize", model.resize, server.uuid, self.flavor())
            if move is not None and move.source == move.dest:
                counts["resize same host ok"] += 1
        elif op == "migrate" and still:
            self.attempt("migrate", model.migrate, rng.choice(still))
        elif op == "finish" and moving:
            finished = rng.choice(moving)
            if rng.random() < 0.6:
                model.confirm(finished)
                counts["confirm ok"] += 1
            else:
                model.revert(finished)
                counts["revert ok"] += 1
        elif op == "fail" and moving:
            new = model.fail_on_destination(rng.choice(moving))
            counts["reschedule " + ("ok" if new else "failed")] += 1
        elif op == "delete" and servers:
            model.delete(rng.choice(servers))
            counts["delete ok"] += 1
        elif op == "boot":
            self.attempt("boot", model.boot, self.flavor())
        elif op == "reconcile":
            counts["reconcile fixes"] += sum(
                f.applied for f in self.reconciler.run(model.states(), apply=True))
            check(self.client, model, self.tally, self.exact,
                  f"step {step} (reconcile)")
            return
        check(self.client, model, self.tally, False, f"step {step} ({op})")

    def finish(self) -> Tally:
        """End every move, then reconcile: nothing may be left over."""
        for u in sorted(self.model.servers):
            if self.model.servers[u].active:
                self.model.confirm(u)
        self.tally.counts["reconcile fixes"] += sum(
            f.applied for f in self.reconciler.run(self.model.states(), apply=True))
        check(self.client, self.model, self.tally, self.exact, "the final reconcile")
        self.tally.final = invariants.state(self.client)
        return self.tally


def run_random(strategy: str, hosts: int, sharing: int, steps: int, seed: int,
               client: PlacementClient | None = None) -> Tally:
    """The random scenario (see ``RandomRun``) on ``client`` (a fresh
    embedded placement by default; it must hold no providers)."""
    sim = RandomRun(strategy, hosts, sharing, seed, client)
    sim.fill()
    for step in range(steps):
        sim.step(step)
    return sim.finish()
