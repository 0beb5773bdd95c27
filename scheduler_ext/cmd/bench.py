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

Timings are wall clock on whatever else the machine runs; the load
average is printed with them. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import shutil
from typing import Any

from scheduler_ext.cmd import common
from scheduler_ext.engine import CapacityIndex
from scheduler_ext.lab import bench_engine as measure
from scheduler_ext.lab import synthetic


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=common.count_list(10),
                        default=[1000, 10000, 100000, 1000000],
                        help="comma-separated fleet sizes in providers, each "
                             "at least 10 (default 1000,10000,100000,1000000)")
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
    parser.add_argument("--scale-out", metavar="WORKERS", type=common.count_list(1),
                        help="instead of the engine benchmark, run this many "
                             "scheduler processes (comma-separated, e.g. "
                             "1,2,4) against one placement on PostgreSQL "
                             "and report decisions per second and the "
                             "conflict rate (needs the test extra and "
                             "PostgreSQL's server binaries)")
    parser.add_argument("--scale-out-ops", type=common.count(1), default=40,
                        help="operations per scheduler process "
                             "(default %(default)s)")
    parser.add_argument("--nested", metavar="SIZES", type=common.count_list(10),
                        help="instead of flat fleets, measure nested fleets of "
                             "these many compute nodes (comma-separated, each "
                             "at least 10), each with three children")
    common.add_format(parser)
    parser.add_argument("--json", metavar="PATH", type=common.writable_file,
                        help="also write the results as JSON to PATH")


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
                "pip install -e '.[test]')")
    if args.scale_out and not (shutil.which("initdb") or glob.glob(
            "/usr/lib/postgresql/*/bin/initdb")):
        raise common.UsageError("--scale-out needs PostgreSQL's server binaries "
                                "(initdb; Debian: apt-get install postgresql)")


# --------------------------------------------------------------------- run
def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if v < 1000 else f"{v:.0f}"
    return str(v)


def run_scale_out(args: argparse.Namespace) -> int:
    from scheduler_ext.lab import scaleout
    counts = args.scale_out
    results, bad = [], 0
    base = None
    for n in counts:
        r = scaleout.run_once(n, ops=args.scale_out_ops, seed=args.seed)
        results.append(r)
        base = base or r["decisions_per_s"]
        bad += len(r["problems"]) + len(r["overcommit"])
        if args.format == "table":
            print(f"schedulers={n}  decisions={r['decisions']} in {r['wall_s']:.1f}s "
                  f"= {r['decisions_per_s']:.1f}/s (x{r['decisions_per_s'] / base:.2f} "
                  f"vs {counts[0]})  claims={r['claims']}  conflicts={r['conflicts']} "
                  f"({100 * r['conflict_rate']:.1f}%)  write re-sends="
                  f"{r['write_retries']}  no valid host={r['no_valid_host']}  "
                  f"servers={r['servers']}  invariant problems={len(r['problems'])}  "
                  f"providers overcommitted by placement={len(r['overcommit'])}",
                  flush=True)
            for p in (r["problems"] + r["overcommit"])[:10]:
                print(f"  {p}")
    if args.format == "json":
        print(json.dumps(results, indent=2, default=_fmt))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=_fmt)
    return common.FINDINGS if bad else common.OK


def run(args: argparse.Namespace) -> int:
    _require(args)
    if args.scale_out:
        return run_scale_out(args)
    if args.nested:
        return run_nested(args.nested, args)
    table = args.format == "table"
    results = []
    if table:
        print(f"# scheduler-ext bench, load average {os.getloadavg()[0]:.2f} "
              f"on {os.cpu_count()} CPUs", flush=True)
    for n in args.sizes:
        res = bench_size(n, args)
        results.append(res)
        if table:
            _print_size(res)
    if table:
        print(f"# load average {os.getloadavg()[0]:.2f}", flush=True)
    doc = {"load_average": os.getloadavg(), "results": results}
    if not table:
        print(json.dumps(doc, indent=2, default=_fmt))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2, default=_fmt)
    return common.OK


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


def _print_size(res: dict[str, Any]) -> None:
    e = res["engine"]
    line = [f"providers={res['providers']}", f"build={res['build_s']:.2f}s",
            f"bytes/provider/class={res['bytes_per_provider_per_class']:.1f}",
            f"select median={e['select']['median_ms']:.3f}ms p99={e['select']['p99_ms']:.3f}ms",
            f"fit median={e['fit']['median_ms']:.3f}ms",
            f"candidates(limit=1000) median={e['candidates_limit_1000']['median_ms']:.2f}ms",
            f"apply={e['apply_claim_release_us']:.0f}us",
            f"refresh={e['refresh_provider_us']:.0f}us"]
    if "baseline" in res:
        b = res["baseline"]
        line.append(f"python-loop median={b['select']['median_ms']:.1f}ms "
                    f"(x{res['baseline_x']:.0f}, same top-k: {b['same_top_k']})")
    if "placement" in res:
        p = res["placement"]
        line.append(
            f"placement median={p['get_allocation_candidates']['median_ms']:.0f}ms "
            f"(x{res['placement_x']:.0f} vs select, "
            f"x{res['placement_x_vs_candidates']:.1f} vs candidates; "
            f"same unlimited answer: {p['same_candidates_unlimited']})")
    print("  ".join(line), flush=True)
    if "snapshot" in res:
        sn = res["snapshot"]
        ac = sn["get_allocation_candidates_s"]
        print(f"  snapshot providers={res['providers']}: "
              f"API (4 GETs/provider, scaled from 100)="
              f"{sn['api_snapshot_s_estimated']:.0f}s "
              f"(x{sn['api_snapshot_s_estimated'] / ac:.0f} one GET "
              f"/allocation_candidates={ac:.2f}s)  "
              f"SQL load+index={sn['sql_initial_load_and_index_s']:.2f}s "
              f"(x{sn['sql_initial_load_and_index_s'] / ac:.1f})  "
              f"refresh no change={sn['sql_refresh_no_change_s'] * 1000:.0f}ms "
              f"(x{sn['sql_refresh_no_change_s'] / ac:.2f})  "
              f"refresh 100 changed={sn['sql_refresh_100_changed_s'] * 1000:.0f}ms "
              f"(x{sn['sql_refresh_100_changed_s'] / ac:.2f})", flush=True)


# ------------------------------------------------------------------ nested
def run_nested(sizes: list[int], args: argparse.Namespace) -> int:
    from scheduler_ext.lab.nested_bench import nested_bench_fleet
    table = args.format == "table"
    results = []
    if table:
        print(f"# scheduler-ext bench --nested, load average "
              f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    for n in sizes:
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
        results.append(res)
        if table:
            _print_nested(res)
    doc = {"load_average": os.getloadavg(), "nested": results}
    if table:
        print(f"# load average {os.getloadavg()[0]:.2f}", flush=True)
    else:
        print(json.dumps(doc, indent=2, default=_fmt))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2, default=_fmt)
    return common.OK


def _print_nested(res: dict[str, Any]) -> None:
    e = res["engine"]
    port, vgpu = e["port"]["select"], e["vgpu"]["select"]
    line = [f"compute_nodes={res['compute_nodes']}", f"providers={res['providers']}",
            f"build={res['build_s']:.2f}s",
            f"select port median={port['median_ms']:.3f}ms p99={port['p99_ms']:.3f}ms",
            f"select vgpu median={vgpu['median_ms']:.3f}ms",
            f"fit port median={e['port']['fit']['median_ms']:.3f}ms",
            f"candidates(limit=1000) median={e['candidates_limit_1000']['median_ms']:.2f}ms"]
    if "baseline" in res:
        b = res["baseline"]
        line.append(f"python-loop median={b['fitting_roots']['median_ms']:.1f}ms "
                    f"(x{b['fitting_roots']['median_ms'] / port['median_ms']:.0f}, "
                    f"same roots: {b['same_roots']})")
    if "placement" in res:
        p = res["placement"]
        pm = p["get_allocation_candidates"]["median_ms"]
        line.append(f"placement median={pm:.0f}ms (x{pm / port['median_ms']:.0f} vs "
                    f"select; same unlimited answer: {p['same_candidates_unlimited']})")
    print("  ".join(line), flush=True)
