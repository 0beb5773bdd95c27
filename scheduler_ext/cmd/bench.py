"""``scheduler-ext bench``: the numpy engine against its baselines, as ratios.

For each fleet size (``--sizes``, default 1k,10k,100k,1M providers, about 1%
of them shared disk pools, 60-90% used; see ``lab.synthetic.bench_fleet``)
one run reports:

* the engine's latency per scheduling request (``CapacityIndex.select``:
  every root that fits, weighed nova's way, best ``--k`` with one
  allocation request each), median and p99 over ``--repeat`` rounds of
  five flavors; also ``fit`` alone and ``candidates(limit=1000)`` (the
  placement-shaped answer nova gets today);
* a plain-Python per-provider loop answering the same question
  (``lab.reference``), on the same fleet, and the ratio;
* with ``--placement``, for sizes up to ``--placement-max`` (10k): a real
  openstack-placement on 127.0.0.1 whose database is filled directly
  through placement's own table objects (after one API call made it create
  the standard traits and classes), timed on nova's query
  ``GET /allocation_candidates?resources=..&root_required=!COMPUTE_STATUS_DISABLED&limit=1000``,
  and the ratio; the engine's unlimited answer is checked against
  placement's first;
* index memory as bytes per provider per resource class, build time, and
  the cost of one ``apply`` (claim + release) and ``refresh_provider``.

With ``--nested SIZES`` it measures nested fleets instead: SIZES compute
nodes each with three children (two bandwidth NICs and a pGPU, see
``lab.nested_bench``), ``select`` for the five flavors each with one
granular group (a QoS port's bandwidth, and a vGPU), the plain-Python
reading of placement's steps as baseline, and with ``--placement`` a real
placement on the same nested fleet (up to ``--placement-max`` nodes).

One row per size through cliff's formatters; ``--json PATH`` writes every
figure. Ctrl-C keeps the sizes finished: their rows are printed and
written, marked ``"partial": true``, and the exit code is 130.

Timings are wall clock on whatever else the machine runs; the load
average goes to stderr with them. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import shutil
import sys
from typing import Any, Callable, Sequence

from scheduler_ext.cmd import base, common
from scheduler_ext.engine import CapacityIndex
from scheduler_ext.lab import bench_engine as measure
from scheduler_ext.lab import synthetic


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--sizes", type=common.count_list(10, MAX_PROVIDERS),
                      help="comma-separated fleet sizes in providers, each "
                           f"from 10 to {MAX_PROVIDERS:,} "
                           "(default 1000,10000,100000,1000000)")
    parser.add_argument("--repeat", type=common.count(1), default=20,
                        help="rounds of the five flavors per size for the engine "
                             "(default %(default)s)")
    parser.add_argument("--k", type=common.count(1), default=3,
                        help="hosts returned per request (default %(default)s)")
    parser.add_argument("--seed", type=common.count(0), default=0, help="fleet seed")
    parser.add_argument("--baseline-max", type=common.count(0), default=1_000_000,
                        help="skip the Python baseline above this size "
                             "(default %(default)s)")
    parser.add_argument("--baseline-requests", type=common.count(1), default=10,
                        help="Python baseline requests per size, at least one "
                             "per flavor up to this many (default %(default)s)")
    parser.add_argument("--placement", action="store_true",
                        help="also time a real placement (needs the test extra)")
    parser.add_argument("--placement-max", type=common.count(10), default=10_000,
                        help="largest size loaded into placement (default %(default)s)")
    parser.add_argument("--placement-repeat", type=common.count(1), default=2,
                        help="placement requests per flavor (default %(default)s)")
    parser.add_argument("--snapshot", action="store_true",
                        help="also time reading the fleet from a real "
                             "placement (API and database) and refreshing "
                             "the engine's index, for sizes up to "
                             "--snapshot-max (needs the test extra)")
    parser.add_argument("--snapshot-max", type=common.count(10), default=50_000,
                        help="largest size loaded for --snapshot "
                             "(default %(default)s)")
    what.add_argument("--scale-out", metavar="WORKERS", type=common.count_list(1, 64),
                        help="instead of the engine benchmark, run this many "
                             "scheduler processes (comma-separated, e.g. "
                             "1,2,4) against one placement on PostgreSQL "
                             "and report decisions per second and the "
                             "conflict rate (needs the test extra and "
                             "PostgreSQL's server binaries)")
    parser.add_argument("--scale-out-ops", type=common.count(1), default=40,
                        help="operations per scheduler process "
                             "(default %(default)s)")
    what.add_argument("--nested", metavar="SIZES",
                      type=common.count_list(10, MAX_PROVIDERS // 4),
                        help="instead of flat fleets, measure nested fleets of "
                             "these many compute nodes (comma-separated, each "
                             "at least 10), each with three children")
    parser.add_argument("--json", metavar="PATH", type=common.writable_file,
                        help="also write the results as JSON to PATH")


#: the largest fleet --sizes takes (about 2 GB of index and fleet)
MAX_PROVIDERS = 50_000_000
DEFAULT_SIZES = [1000, 10000, 100000, 1000000]


def _require(args: argparse.Namespace) -> None:
    """What the chosen measurements need, checked before any work."""
    needs = []
    if args.placement or args.snapshot or args.scale_out:
        needs += ["placement", "gunicorn"]
    if args.scale_out:
        needs.append("psycopg2")
    for module in needs:
        if importlib.util.find_spec(module) is None:
            flag = ("--scale-out" if args.scale_out else
                    "--placement" if args.placement else "--snapshot")
            raise common.UsageError(
                f"{flag} needs the Python module {module!r} (the test extra: "
                f"{sys.executable} -m pip install -e '.[test]')")
    if args.scale_out and not (shutil.which("initdb") or glob.glob(
            "/usr/lib/postgresql/*/bin/initdb")):
        raise common.UsageError("--scale-out needs PostgreSQL's server binaries "
                                "(initdb; Debian: apt-get install postgresql)")


# --------------------------------------------------------------------- run
def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if v < 1000 else f"{v:.0f}"
    return str(v)


def _write(path: str, doc: dict[str, Any]) -> None:
    with common.write_atomically(path) as f:
        json.dump(doc, f, indent=2, default=_fmt)
        f.write("\n")


def _each(flag: str, sizes: list[int], one: Callable[[int], dict[str, Any]],
          describe: Callable[[dict[str, Any]], str]) -> tuple[list[dict[str, Any]], bool]:
    """Run ``one`` per size; (results, interrupted). Ctrl-C after a size
    finished keeps the finished ones; not enough memory names the size."""
    results: list[dict[str, Any]] = []
    for n in sizes:
        try:
            results.append(one(n))
        except KeyboardInterrupt:
            if not results:
                raise
            return results, True
        except MemoryError:
            raise common.UsageError(f"{flag} {n}: not enough memory on this "
                                    "machine for this size") from None
        print(describe(results[-1]), file=sys.stderr, flush=True)
    return results, False


def _row(res: dict[str, Any], columns: list[tuple[str, Callable[[dict[str, Any]], Any]]]
         ) -> tuple[Any, ...]:
    out = []
    for _, get in columns:
        try:
            out.append(get(res))
        except KeyError:        # not measured at this size
            out.append(None)
    return tuple(out)


def _ms(value: float) -> float:
    return round(value, 3)


FLAT: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("providers", lambda r: r["providers"]),
    ("build s", lambda r: round(r["build_s"], 2)),
    ("bytes/provider/class", lambda r: round(r["bytes_per_provider_per_class"], 1)),
    ("select median ms", lambda r: _ms(r["engine"]["select"]["median_ms"])),
    ("select p99 ms", lambda r: _ms(r["engine"]["select"]["p99_ms"])),
    ("fit median ms", lambda r: _ms(r["engine"]["fit"]["median_ms"])),
    ("candidates(limit=1000) median ms",
     lambda r: _ms(r["engine"]["candidates_limit_1000"]["median_ms"])),
    ("apply us", lambda r: round(r["engine"]["apply_claim_release_us"])),
    ("refresh us", lambda r: round(r["engine"]["refresh_provider_us"])),
]
BASELINE = [
    ("python-loop median ms", lambda r: round(r["baseline"]["select"]["median_ms"], 1)),
    ("python-loop x", lambda r: round(r["baseline_x"])),
    ("same top-k", lambda r: r["baseline"]["same_top_k"]),
]
PLACEMENT = [
    ("placement median ms",
     lambda r: round(r["placement"]["get_allocation_candidates"]["median_ms"])),
    ("placement x vs select", lambda r: round(r["placement_x"])),
    ("placement x vs candidates", lambda r: round(r["placement_x_vs_candidates"], 1)),
    ("same unlimited answer", lambda r: r["placement"]["same_candidates_unlimited"]),
]
SNAPSHOT = [
    ("snapshot API s (estimated)",
     lambda r: round(r["snapshot"]["api_snapshot_s_estimated"])),
    ("GET /allocation_candidates s",
     lambda r: round(r["snapshot"]["get_allocation_candidates_s"], 2)),
    ("SQL load+index s",
     lambda r: round(r["snapshot"]["sql_initial_load_and_index_s"], 2)),
    ("refresh no change ms",
     lambda r: round(r["snapshot"]["sql_refresh_no_change_s"] * 1000)),
    ("refresh 100 changed ms",
     lambda r: round(r["snapshot"]["sql_refresh_100_changed_s"] * 1000)),
]
NESTED = [
    ("compute nodes", lambda r: r["compute_nodes"]),
    ("providers", lambda r: r["providers"]),
    ("build s", lambda r: round(r["build_s"], 2)),
    ("select port median ms", lambda r: _ms(r["engine"]["port"]["select"]["median_ms"])),
    ("select port p99 ms", lambda r: _ms(r["engine"]["port"]["select"]["p99_ms"])),
    ("select vgpu median ms", lambda r: _ms(r["engine"]["vgpu"]["select"]["median_ms"])),
    ("fit port median ms", lambda r: _ms(r["engine"]["port"]["fit"]["median_ms"])),
    ("candidates(limit=1000) median ms",
     lambda r: _ms(r["engine"]["candidates_limit_1000"]["median_ms"])),
]
NESTED_BASELINE = [
    ("python-loop median ms",
     lambda r: round(r["baseline"]["fitting_roots"]["median_ms"], 1)),
    ("python-loop x", lambda r: round(r["baseline"]["fitting_roots"]["median_ms"]
                                      / r["engine"]["port"]["select"]["median_ms"])),
    ("same roots", lambda r: r["baseline"]["same_roots"]),
]
NESTED_PLACEMENT = [
    ("placement median ms",
     lambda r: round(r["placement"]["get_allocation_candidates"]["median_ms"])),
    ("placement x vs select", lambda r: round(
        r["placement"]["get_allocation_candidates"]["median_ms"]
        / r["engine"]["port"]["select"]["median_ms"])),
    ("same unlimited answer", lambda r: r["placement"]["same_candidates_unlimited"]),
]
SCALE_OUT = [
    ("schedulers", lambda r: r["schedulers"]),
    ("decisions", lambda r: r["decisions"]),
    ("seconds", lambda r: round(r["wall_s"], 1)),
    ("decisions/s", lambda r: round(r["decisions_per_s"], 1)),
    ("claims", lambda r: r["claims"]),
    ("conflicts", lambda r: r["conflicts"]),
    ("conflict %", lambda r: round(100 * r["conflict_rate"], 1)),
    ("write re-sends", lambda r: r["write_retries"]),
    ("no valid host", lambda r: r["no_valid_host"]),
    ("servers", lambda r: r["servers"]),
    ("invariant problems", lambda r: len(r["problems"])),
    ("providers overcommitted by placement", lambda r: len(r["overcommit"])),
]


class Bench(base.Lister):
    """measure the numpy engine against baselines, as ratios"""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser)

    def planned_columns(self, parsed_args: argparse.Namespace) -> Sequence[str]:
        return [name for name, _ in _columns(parsed_args)]

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        args = parsed_args
        _require(args)
        columns = _columns(args)
        print(f"# scheduler-ext bench, load average {os.getloadavg()[0]:.2f} "
              f"on {os.cpu_count()} CPUs", file=sys.stderr, flush=True)
        if args.scale_out:
            key = "scale_out"
            results, interrupted = _each(
                "--scale-out", args.scale_out,
                lambda n: _scale_out_once(n, args),
                lambda r: f"schedulers={r['schedulers']} done")
            problems = [p for r in results for p in r["problems"] + r["overcommit"]]
            for p in problems[:20]:
                print(f"  {p}", file=sys.stderr)
            self.exit_code = common.FINDINGS if problems else common.OK
        elif args.nested:
            key = "nested"
            results, interrupted = _each(
                "--nested", args.nested, lambda n: bench_nested(n, args),
                lambda r: f"compute_nodes={r['compute_nodes']} done")
        else:
            key = "results"
            results, interrupted = _each(
                "--sizes", args.sizes or DEFAULT_SIZES, lambda n: bench_size(n, args),
                lambda r: f"providers={r['providers']} done")
        print(f"# load average {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
        doc: dict[str, Any] = {"load_average": os.getloadavg(), key: results}
        if interrupted:
            doc["partial"] = True
            self.error(f"interrupted after {len(results)} size(s); those are "
                       "shown" + (f" and written to {args.json}" if args.json else "")
                       + ', marked "partial": true')
            self.exit_code = common.INTERRUPTED
        if args.json:
            _write(args.json, doc)
        return [name for name, _ in columns], [_row(r, columns) for r in results]


def _columns(args: argparse.Namespace) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    """The table's columns for the measurements the flags ask for."""
    if args.scale_out:
        return SCALE_OUT
    if args.nested:
        return NESTED + (NESTED_BASELINE if args.baseline_max else []) + \
            (NESTED_PLACEMENT if args.placement else [])
    return FLAT + (BASELINE if args.baseline_max else []) + \
        (PLACEMENT if args.placement else []) + (SNAPSHOT if args.snapshot else [])


def _scale_out_once(n: int, args: argparse.Namespace) -> dict[str, Any]:
    from scheduler_ext.lab import scaleout
    r: dict[str, Any] = scaleout.run_once(n, ops=args.scale_out_ops, seed=args.seed)
    r["schedulers"] = n
    return r


def bench_size(n: int, args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement the options ask for, on one fleet of ``n``
    providers."""
    gen_s, fleet = measure.timed(lambda: synthetic.bench_fleet(n, args.seed))
    build_s, index = measure.timed(lambda: CapacityIndex.from_columnar(fleet))
    mem = index.memory()
    res: dict[str, Any] = {"providers": n, "sharing": int((fleet.trait_set_of == 4).sum()),
                           "build_s": build_s,
                           "bytes_per_provider_per_class": mem["bytes_per_provider_per_class"],
                           "index_bytes_per_provider": mem["total"] / n}
    res["engine"] = measure.bench_engine(index, fleet, args)
    eng = res["engine"]["select"]["median_ms"]
    if n <= args.baseline_max:
        res["baseline"] = measure.bench_baseline(fleet, index, args)
        res["baseline_x"] = res["baseline"]["select"]["median_ms"] / eng
    if args.placement and n <= args.placement_max:
        res["placement"] = measure.bench_placement(fleet, index, args)
        pm = res["placement"]["get_allocation_candidates"]["median_ms"]
        res["placement_x"] = pm / eng
        res["placement_x_vs_candidates"] = \
            pm / res["engine"]["candidates_limit_1000"]["median_ms"]
    if args.snapshot and n <= args.snapshot_max:
        res["snapshot"] = measure.bench_snapshot(fleet, args)
    return res


# ------------------------------------------------------------------ nested
def bench_nested(n: int, args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement the options ask for, on a nested fleet of ``n``
    compute nodes."""
    from scheduler_ext.lab.nested_bench import nested_bench_fleet
    gen_s, fleet = measure.timed(lambda: nested_bench_fleet(n, args.seed))
    build_s, index = measure.timed(lambda: CapacityIndex.from_columnar(fleet))
    index.trees()
    res: dict[str, Any] = {"compute_nodes": n, "providers": len(fleet),
                           "build_s": build_s,
                           "engine": measure.bench_nested_engine(index, args)}
    if n <= args.baseline_max:
        res["baseline"] = measure.bench_nested_baseline(fleet, index, args)
    if args.placement and n <= args.placement_max:
        res["placement"] = measure.bench_nested_placement(fleet, index, args)
    return res
