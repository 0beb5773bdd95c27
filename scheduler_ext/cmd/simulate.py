"""``scheduler-ext simulate``: replay server lifecycles on an embedded
placement with nova's own move behaviour, under our strategy and nova's
stock one, and report what each achieved and whether every invariant held.

Scenarios (``--scenario``):

* ``bug-1790204``: nova's regression case: one host (VCPU 2, MEMORY_MB 8192,
  DISK_GB 1028), a server of 1 vCPU / 2048 MB / 1028 GB resized to 2 vCPU.
* ``random``: a fleet with sharing storage, filled with servers, then a
  seeded random mix of resizes, cold migrations, confirms, reverts,
  failures on the destination (reschedules), deletes, boots and reconciles.
* ``all`` (default): both.
* a FILE: an operator's own fleet and events (``lab/scenario_file.py`` has
  the format; it is checked before anything runs).

Counts read "succeeded/attempted" (through cliff's formatters: ``-f
table|json|yaml|value|csv``); each scenario's title, the violations and the
load average go to stderr; ``--json PATH`` writes every figure. The
invariants are checked after every step on what it touched (the random
scenario and a file's events) and in full every ``--full-check-every``
steps and at the end; exit 1 if any broke.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

from scheduler_ext.cmd import base, common, plot
from scheduler_ext.cmd import simulate_report
from scheduler_ext.lab.simulation import FULL_CHECK_EVERY, run_bug_1790204
from scheduler_ext.lab.simulation_runs import run_strategies
from scheduler_ext.lab.tally import Tally

NAMED = ("all", "random", "bug-1790204")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", default="all", metavar="NAME|FILE",
                        help="all (default: bug-1790204, then random), random, "
                             "bug-1790204, or a YAML/JSON file with your own "
                             "fleet and events")
    parser.add_argument("--strategy", choices=("same_host", "stock", "both"),
                        default="both",
                        help="move strategy to run (default: both, compared)")
    parser.add_argument("--hosts", type=common.count(1, 1_000_000), default=12,
                        help="compute nodes in the random fleet (default %(default)s)")
    parser.add_argument("--sharing", type=common.count(0, 100_000), default=2,
                        help="sharing storage providers in the random fleet "
                             "(default %(default)s)")
    parser.add_argument("--steps", type=common.count(0, 100_000_000), default=400,
                        help="random operations after the fleet is filled "
                             "(default %(default)s)")
    parser.add_argument("--seed", type=common.count(0), default=1,
                        help="seed of the random scenario (default %(default)s)")
    parser.add_argument("--full-check-every", type=common.count(0),
                        default=FULL_CHECK_EVERY, metavar="N",
                        help="a full invariant check every N steps besides the "
                             "one at the end; 0: only at the end "
                             "(default %(default)s)")
    parser.add_argument("--jobs", type=common.count(1, 64),
                        default=min(2, os.cpu_count() or 1),
                        help="strategies run in parallel processes "
                             "(default %(default)s)")
    parser.add_argument("--json", metavar="PATH", type=common.writable_file,
                        help="also write every figure as JSON to PATH")
    parser.add_argument("--plot", metavar="PATH", type=common.writable_file,
                        help="draw the timeline of the random scenario or a "
                             "scenario file to PATH, in the format its "
                             "extension names (.png, .svg, .pdf; needs "
                             "matplotlib)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction,
                        default=None,
                        help="progress bars on stderr; needs tqdm, the "
                             "'progress' extra (default: when stderr is a "
                             "terminal and tqdm is installed)")


def _scenario_file(path: str) -> Any:
    """The checked scenario file; UsageError naming it otherwise."""
    if not os.path.exists(path):
        raise common.UsageError(f"--scenario {path}: not one of {', '.join(NAMED)} "
                                "and no such file")
    try:
        from scheduler_ext.lab import scenario_file
    except ImportError as exc:
        raise common.UsageError(f"--scenario {path}: reading a scenario file needs "
                                f"{exc.name}: {sys.executable} -m pip install "
                                "'scheduler-ext[scenario]'") from None
    try:
        return scenario_file.load(common.read_text(path, "--scenario"), path)
    except scenario_file.ScenarioError as exc:
        raise common.UsageError(f"--scenario {exc}") from None


def _progress(asked: bool | None) -> bool:
    """Whether to draw progress bars: as ``--progress``/``--no-progress``
    say, else when stderr is a terminal; never without tqdm (the
    ``progress`` extra), and UsageError if ``--progress`` asks for them
    then (checked before work)."""
    try:
        import tqdm  # noqa: F401
    except ImportError:
        if asked:
            raise common.UsageError(
                "--progress needs tqdm, which is not installed: "
                f"{sys.executable} -m pip install 'scheduler-ext[progress]'"
                ) from None
        return False
    return sys.stderr.isatty() if asked is None else asked


class _Bars:
    """tqdm bars on stderr, one per strategy."""

    def __init__(self, strategies: tuple[str, ...], total: int, enabled: bool):
        self.bars: dict[str, Any] = {}
        if enabled and total:
            from tqdm import tqdm
            self.bars = {s: tqdm(total=total, unit="step",
                                 desc=f"{simulate_report.HEADERS.get(s, s):>6}",
                                 position=i, file=sys.stderr, leave=True,
                                 dynamic_ncols=True)
                         for i, s in enumerate(strategies)}

    def __call__(self, strategy: str, done: int) -> None:
        bar = self.bars.get(strategy)
        if bar is not None and done > bar.n:
            bar.update(done - bar.n)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def _strategies(args: argparse.Namespace) -> tuple[str, ...]:
    return ("stock", "same_host") if args.strategy == "both" else (args.strategy,)


def _check_outputs(args: argparse.Namespace) -> None:
    """--plot and --json: usable together, before any work."""
    if not args.plot:
        return
    if args.scenario == "bug-1790204":
        raise common.UsageError("--plot: the bug-1790204 scenario is one resize, "
                                "with no timeline to draw; plot --scenario "
                                "random, all or a FILE")
    if args.json and os.path.abspath(args.json) == os.path.abspath(args.plot):
        raise common.UsageError(f"--json and --plot name the same file "
                                f"{args.plot}: give each its own")
    plot.check_path(args.plot)


def run(args: argparse.Namespace) -> tuple[dict[str, dict[str, Tally]], dict[str, Any]]:
    """(scenario -> strategy -> Tally, the report --json writes)."""
    scenario_file = None if args.scenario in NAMED else _scenario_file(args.scenario)
    _check_outputs(args)
    strategies = _strategies(args)
    progress = _progress(args.progress)
    report: dict[str, Any] = {"parameters": {
        k: getattr(args, k) for k in ("scenario", "strategy", "hosts", "sharing",
                                      "steps", "seed", "full_check_every", "jobs")},
        "scenarios": {}, "load_average_before": list(os.getloadavg())}
    runs: dict[str, dict[str, Tally]] = {}
    if args.scenario in ("all", "bug-1790204"):
        runs["bug-1790204"] = {s: run_bug_1790204(s) for s in strategies}
    if args.scenario in ("all", "random"):
        bars = _Bars(strategies, args.steps, progress)
        try:
            runs["random"], report["servers_placed_by_fill"] = run_strategies(
                strategies, args.hosts, args.sharing, args.steps, args.seed,
                jobs=args.jobs, full_check_every=args.full_check_every,
                progress=bars)
        finally:
            bars.close()
    if scenario_file is not None:
        runs["file"] = _replay(scenario_file, strategies, args, progress)
    report["load_average_after"] = list(os.getloadavg())
    for name, tallies in runs.items():
        report["scenarios"][name] = {s: t.as_dict() for s, t in tallies.items()}
    return runs, report


class Simulate(base.Lister):
    """replay resize/migrate scenarios on an embedded placement, stock vs ours"""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser)

    def planned_columns(self, parsed_args: argparse.Namespace) -> Sequence[str]:
        return simulate_report.columns(_strategies(parsed_args))

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        args = parsed_args
        runs, report = run(args)
        for line in simulate_report.notes(args, runs, report):
            print(line, file=sys.stderr)
        if args.json:
            common.write_json(args.json, report)
        if args.plot:
            name = "file" if "file" in runs else "random"
            title = simulate_report.title(name, args, report)
            plot.draw(args.plot, {s: t.timeline for s, t in runs[name].items()},
                      f"scheduler-ext simulate, {title}")
        broken = sum(t.violation_count for tallies in runs.values()
                     for t in tallies.values())
        self.exit_code = common.FINDINGS if broken else common.OK
        return (simulate_report.columns(_strategies(args)),
                list(simulate_report.rows(runs)))


def _replay(scenario: Any, strategies: tuple[str, ...], args: argparse.Namespace,
            progress: bool) -> dict[str, Tally]:
    from scheduler_ext.lab.scenario_run import run_scenario
    bars = _Bars(strategies, len(scenario.events), progress)
    try:
        out = {}
        for strategy in strategies:
            def report(n: int, strategy: str = strategy) -> None:
                bars(strategy, n)
            out[strategy] = run_scenario(scenario, strategy,
                                         args.full_check_every, report)
        return out
    finally:
        bars.close()
