"""The stock-vs-ours rows of ``scheduler-ext simulate`` (through cliff's
formatters) and the lines about the run it writes to stderr."""

from __future__ import annotations

import argparse
from typing import Any, Iterator, Mapping

from scheduler_ext.lab.tally import OPERATIONS, Tally

#: how many violations of each strategy are listed on stderr
SHOWN_VIOLATIONS = 20
#: a strategy's column header: our strategy is "ours", as the README says
HEADERS = {"same_host": "ours", "stock": "stock"}


def title(name: str, args: argparse.Namespace, report: Mapping[str, Any]) -> str:
    """What a scenario ran: its fleet, steps and seed, or its file."""
    if name == "bug-1790204":
        return ("scenario bug-1790204: one host VCPU 2, MEMORY_MB 8192, "
                "DISK_GB 1028; resize 1 -> 2 vCPU")
    if name == "random":
        return (f"scenario random: {args.hosts} hosts, {args.sharing} sharing "
                f"storage providers, {args.steps} steps, seed {args.seed}; "
                f"{report.get('servers_placed_by_fill', 0)} servers placed by "
                "the fill")
    return f"scenario file {args.scenario}"


def _cell(t: Tally, op: str) -> str:
    if op == "reconcile fixes":
        return str(t.counts[op])
    return "%d/%d" % t.ratio(op)


def columns(strategies: tuple[str, ...]) -> tuple[str, ...]:
    return ("scenario", "measure") + tuple(HEADERS[s] for s in strategies)


def rows(runs: Mapping[str, Mapping[str, Tally]]) -> Iterator[tuple[str, ...]]:
    """Per scenario: one row per operation (succeeded/attempted), the
    skipped and did-not-fit counts, the invariant figures and seconds; one
    column per strategy."""
    for name, tallies in runs.items():
        found = [(op, [_cell(t, op) for t in tallies.values()]) for op in OPERATIONS]
        extra = sorted({k for t in tallies.values() for k in t.counts
                        if "skipped" in k or "did not fit" in k})
        found += [(k, [str(t.counts[k]) for t in tallies.values()]) for k in extra]
        found += [("invariant violations",
                   [str(t.violation_count) for t in tallies.values()]),
                  ("invariant checks (touched/full)",
                   [f"{t.checks['touched']}/{t.checks['full']}"
                    for t in tallies.values()]),
                  ("seconds", [f"{t.seconds:.1f}" for t in tallies.values()])]
        for label, cells in found:
            yield (name, label, *cells)


def notes(args: argparse.Namespace, runs: Mapping[str, Mapping[str, Tally]],
          report: Mapping[str, Any]) -> Iterator[str]:
    """Lines for stderr: each scenario's title, its last error and
    violations (the findings), the load average."""
    for name, tallies in runs.items():
        yield title(name, args, report)
        for strategy, t in tallies.items():
            who = HEADERS[strategy]
            if "last error" in t.counts:
                yield f"  {who}: {t.counts['last error']}"
            for v in t.violations[:SHOWN_VIOLATIONS]:
                yield f"  {who}: invariant violation: {v}"
    yield (f"load average {report['load_average_before'][0]:.2f} before, "
           f"{report['load_average_after'][0]:.2f} after")
