"""``scheduler-ext simulate``: replay server lifecycles on an embedded
placement with nova's own move behaviour, under our strategy and nova's
stock one, and report what each achieved and whether every invariant held.

Scenarios:

* ``bug-1790204``: nova's regression case: one host (VCPU 2, MEMORY_MB 8192,
  DISK_GB 1028), a server of 1 vCPU / 2048 MB / 1028 GB resized to 2 vCPU.
* ``random``: a fleet with sharing storage, filled with servers,
  then a seeded random mix of resizes, cold migrations, confirms, reverts,
  failures on the destination (reschedules), deletes, boots and reconciles.

The default runs both. Counts read "succeeded/attempted".
"""

from __future__ import annotations

import argparse
import collections
import random
import uuid as uuidlib

from scheduler_ext import driver as se_driver
from scheduler_ext import errors, fleet, invariants
from scheduler_ext.novamodel import NovaModel
from scheduler_ext.placement import EmbeddedPlacement, Inventory, PlacementClient
from scheduler_ext.reconcile import Reconciler

FLAVORS = {
    "small": {"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 40},
    "medium": {"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80},
    "large": {"VCPU": 8, "MEMORY_MB": 16384, "DISK_GB": 160},
    "xlarge": {"VCPU": 16, "MEMORY_MB": 30000, "DISK_GB": 320},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", choices=("all", "random", "bug-1790204"),
                        default="all",
                        help="default: bug-1790204, then random")
    parser.add_argument("--strategy", choices=("same_host", "stock", "both"),
                        default="both",
                        help="move strategy to run (default: both, compared)")
    parser.add_argument("--hosts", type=int, default=12,
                        help="compute nodes in the random fleet")
    parser.add_argument("--sharing", type=int, default=2,
                        help="sharing storage providers in the random fleet")
    parser.add_argument("--steps", type=int, default=400,
                        help="random operations after the fleet is filled")
    parser.add_argument("--seed", type=int, default=1)


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


def _uuid_factory(rng: random.Random):
    return lambda: str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


def _check(client, model, tally: Tally, exact: bool, step: str) -> None:
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
        _check(client, model, tally, strategy == "same_host", "resize")
        model.confirm(server.uuid)
        tally.counts["confirm ok"] += 1
        tally.counts["reconcile fixes"] += sum(
            f.applied for f in Reconciler(client).run(model.states(), apply=True))
    _check(client, model, tally, strategy == "same_host", "the scenario")
    return tally


def run_random(strategy: str, args: argparse.Namespace,
               client: PlacementClient | None = None) -> Tally:
    """The random scenario on ``client`` (a fresh embedded placement by
    default; it must hold no providers)."""
    rng = random.Random(args.seed)
    tally = Tally()
    client = client if client is not None else EmbeddedPlacement()
    fleet.build(client, hosts=args.hosts, sharing=args.sharing, seed=args.seed)
    drv = se_driver.SchedulerDriver(client, se_driver.make_conf(
        move_strategy=strategy))
    model = NovaModel(client, drv.select_destinations,
                      uuid_factory=_uuid_factory(random.Random(args.seed + 1)))
    reconciler = Reconciler(client)
    exact = strategy == "same_host"
    names = sorted(FLAVORS)

    def attempt(op: str, fn, *a, **kw):
        try:
            result = fn(*a, **kw)
        except errors.NoValidHost:
            tally.counts[op + " failed"] += 1
            return None
        tally.counts[op + " ok"] += 1
        return result

    # fill the fleet until boots stop fitting
    misses = 0
    while misses < 5:
        if attempt("boot", model.boot, FLAVORS[rng.choice(names)]) is None:
            misses += 1
    for step in range(args.steps):
        servers = sorted(model.servers)
        moving = [u for u in servers if model.servers[u].active]
        still = [u for u in servers if not model.servers[u].active]
        op = rng.choices(
            ("resize", "migrate", "finish", "fail", "delete", "boot", "reconcile"),
            (30, 10, 30, 8, 6, 10, 6))[0]
        if op == "resize" and still:
            server = model.servers[rng.choice(still)]
            move = attempt("resize", model.resize, server.uuid,
                           FLAVORS[rng.choice(names)])
            if move is not None and move.source == move.dest:
                tally.counts["resize same host ok"] += 1
        elif op == "migrate" and still:
            attempt("migrate", model.migrate, rng.choice(still))
        elif op == "finish" and moving:
            server = rng.choice(moving)
            if rng.random() < 0.6:
                model.confirm(server)
                tally.counts["confirm ok"] += 1
            else:
                model.revert(server)
                tally.counts["revert ok"] += 1
        elif op == "fail" and moving:
            new = model.fail_on_destination(rng.choice(moving))
            tally.counts["reschedule " + ("ok" if new else "failed")] += 1
        elif op == "delete" and servers:
            model.delete(rng.choice(servers))
            tally.counts["delete ok"] += 1
        elif op == "boot":
            attempt("boot", model.boot, FLAVORS[rng.choice(names)])
        elif op == "reconcile":
            fixes = reconciler.run(model.states(), apply=True)
            tally.counts["reconcile fixes"] += sum(f.applied for f in fixes)
            _check(client, model, tally, exact, f"step {step} (reconcile)")
            continue
        _check(client, model, tally, False, f"step {step} ({op})")
    # end every move, then reconcile: nothing may be left over
    for u in sorted(model.servers):
        if model.servers[u].active:
            model.confirm(u)
    tally.counts["reconcile fixes"] += sum(
        f.applied for f in reconciler.run(model.states(), apply=True))
    _check(client, model, tally, exact, "the final reconcile")
    tally.final = invariants.state(client)
    return tally


def run(args: argparse.Namespace) -> int:
    strategies = ("stock", "same_host") if args.strategy == "both" else (args.strategy,)
    scenarios = ("bug-1790204", "random") if args.scenario == "all" else (args.scenario,)
    bad = 0
    for scenario in scenarios:
        if scenario == "random":
            print(f"\nscenario random: {args.hosts} hosts, {args.sharing} sharing "
                  f"storage providers, {args.steps} steps, seed {args.seed} "
                  "(succeeded/attempted)")
        else:
            print("scenario bug-1790204: one host VCPU 2, MEMORY_MB 8192, "
                  "DISK_GB 1028; resize 1 -> 2 vCPU (succeeded/attempted)")
        for strategy in strategies:
            tally = (run_bug_1790204(strategy) if scenario == "bug-1790204"
                     else run_random(strategy, args))
            print(tally.line(strategy))
            if "last error" in tally.counts:
                print(f"{'':>12}{tally.counts['last error']}")
            print(f"{'':>12}invariant violations: {len(tally.violations)}")
            for v in tally.violations[:20]:
                print(f"{'':>14}{v}")
            bad += len(tally.violations)
    return 1 if bad else 0
