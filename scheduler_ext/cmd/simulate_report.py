"""The stock-vs-ours table of ``scheduler-ext simulate``."""

from __future__ import annotations

import argparse
from typing import Any, Iterator, Mapping

from scheduler_ext.lab.tally import OPERATIONS, Tally

#: how many violations of each strategy the table lists
SHOWN_VIOLATIONS = 20


def _title(name: str, args: argparse.Namespace, report: Mapping[str, Any]) -> str:
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


def table_lines(args: argparse.Namespace, runs: Mapping[str, Mapping[str, Tally]],
                report: Mapping[str, Any]) -> Iterator[str]:
    """One table per scenario: operations down, strategies across."""
    for i, (name, tallies) in enumerate(runs.items()):
        if i:
            yield ""
        yield _title(name, args, report)
        names = list(tallies)
        width = max(12, *(len(n) + 2 for n in names))
        yield f"  {'(succeeded/attempted)':<32}" + "".join(
            f"{n:>{width}}" for n in names)
        rows = [(op, [_cell(t, op) for t in tallies.values()]) for op in OPERATIONS]
        extra = sorted({k for t in tallies.values() for k in t.counts
                        if "skipped" in k or "did not fit" in k})
        rows += [(k, [str(t.counts[k]) for t in tallies.values()]) for k in extra]
        rows += [("invariant violations",
                  [str(t.violation_count) for t in tallies.values()]),
                 ("invariant checks (touched/full)",
                  [f"{t.checks['touched']}/{t.checks['full']}" for t in tallies.values()]),
                 ("seconds", [f"{t.seconds:.1f}" for t in tallies.values()])]
        for label, cells in rows:
            yield f"  {label:<32}" + "".join(f"{c:>{width}}" for c in cells)
        for strategy, t in tallies.items():
            if "last error" in t.counts:
                yield f"  {strategy}: {t.counts['last error']}"
            for v in t.violations[:SHOWN_VIOLATIONS]:
                yield f"  {strategy}: {v}"
    yield ""
    yield (f"load average {report['load_average_before'][0]:.2f} before, "
           f"{report['load_average_after'][0]:.2f} after")
