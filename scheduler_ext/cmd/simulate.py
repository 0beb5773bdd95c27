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

from scheduler_ext.lab.simulation import run_bug_1790204, run_random


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
                     else run_random(strategy, args.hosts, args.sharing,
                                   args.steps, args.seed))
            print(tally.line(strategy))
            if "last error" in tally.counts:
                print(f"{'':>12}{tally.counts['last error']}")
            print(f"{'':>12}invariant violations: {len(tally.violations)}")
            for v in tally.violations[:20]:
                print(f"{'':>14}{v}")
            bad += len(tally.violations)
    return 1 if bad else 0
