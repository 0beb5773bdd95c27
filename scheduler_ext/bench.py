"""``scheduler-ext bench``: the numpy engine against its baselines, as ratios.

For each fleet size (``--sizes``, default 1k,10k,100k,1M providers, about 1%
of them shared disk pools, 60-90% used; see ``engine.synthetic.bench_fleet``)
one run reports:

* the engine's latency per scheduling request (``CapacityIndex.select``:
  every root that fits, weighed nova's way, best ``--k`` with one
  allocation request each), median and p99 over ``--repeat`` rounds of
  five flavors; also ``fit`` alone and ``candidates(limit=1000)`` (the
  placement-shaped answer nova gets today);
* a plain-Python per-provider loop answering the same question
  (``engine.reference``), on the same fleet, and the ratio;
* with ``--placement``, for sizes up to ``--placement-max`` (10k): a real
  openstack-placement on 127.0.0.1 whose database is filled directly
  through placement's own table objects (after one API call made it create
  the standard traits and classes), timed on nova's query
  ``GET /allocation_candidates?resources=..&root_required=!COMPUTE_STATUS_DISABLED&limit=1000``,
  and the ratio; the engine's unlimited answer is checked against
  placement's first;
* index memory as bytes per provider per resource class, build time, and
  the cost of one ``apply`` (claim + release) and ``refresh_provider``.

Timings are wall clock on whatever else the machine runs; the load
average is printed with them. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable
from urllib.parse import urlencode

import numpy as np

from scheduler_ext import errors
from scheduler_ext.engine import CandidateRequest, CapacityIndex, Weigher, reference, synthetic
from scheduler_ext.engine.columnar import ColumnarFleet
from scheduler_ext.placement.model import Inventory, Provider, ProviderRecord

#: (VCPU, MEMORY_MB, DISK_GB) of the flavors each round asks for.
FLAVORS = ((1, 2048, 20), (2, 4096, 40), (4, 8192, 80), (8, 16384, 160), (16, 65536, 320))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="1000,10000,100000,1000000",
                        help="comma-separated fleet sizes in providers "
                             "(default %(default)s)")
    parser.add_argument("--repeat", type=int, default=20,
                        help="rounds of the five flavors per size for the engine "
                             "(default %(default)s)")
    parser.add_argument("--k", type=int, default=3,
                        help="hosts returned per request (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="fleet seed")
    parser.add_argument("--baseline-max", type=int, default=1_000_000,
                        help="skip the Python baseline above this size "
                             "(default %(default)s)")
    parser.add_argument("--baseline-requests", type=int, default=10,
                        help="Python baseline requests per size, at least one "
                             "per flavor up to this many (default %(default)s)")
    parser.add_argument("--placement", action="store_true",
                        help="also time a real placement (needs the test extra)")
    parser.add_argument("--placement-max", type=int, default=10_000,
                        help="largest size loaded into placement (default %(default)s)")
    parser.add_argument("--placement-repeat", type=int, default=2,
                        help="placement requests per flavor (default %(default)s)")
    parser.add_argument("--snapshot", action="store_true",
                        help="also time reading the fleet from a real "
                             "placement (API and database) and refreshing "
                             "the engine's index, for sizes up to "
                             "--snapshot-max (needs the test extra)")
    parser.add_argument("--snapshot-max", type=int, default=50_000,
                        help="largest size loaded for --snapshot "
                             "(default %(default)s)")
    parser.add_argument("--scale-out", metavar="WORKERS",
                        help="instead of the engine benchmark, run this many "
                             "scheduler processes (comma-separated, e.g. "
                             "1,2,4) against one placement on PostgreSQL "
                             "and report decisions per second and the "
                             "conflict rate (needs the test extra and "
                             "PostgreSQL's server binaries)")
    parser.add_argument("--scale-out-ops", type=int, default=40,
                        help="operations per scheduler process "
                             "(default %(default)s)")
    parser.add_argument("--json", metavar="PATH",
                        help="also write the results as JSON to PATH")


def _requests(limit: int | None = None) -> list[CandidateRequest]:
    return [CandidateRequest({"VCPU": c, "MEMORY_MB": m, "DISK_GB": d},
                             root_forbidden=["COMPUTE_STATUS_DISABLED"], limit=limit)
            for c, m, d in FLAVORS]


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _stats(samples: list[float]) -> dict[str, float]:
    ms = sorted(1e3 * s for s in samples)
    p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]
    return {"median_ms": statistics.median(ms), "p99_ms": p99, "n": len(ms)}


def _allocs(answer: dict) -> set:
    return {frozenset((rp, rc, n) for rp, v in a["allocations"].items()
                      for rc, n in v["resources"].items())
            for a in answer["allocation_requests"]}


# ------------------------------------------------------------------ engine
def bench_engine(index: CapacityIndex, fleet: ColumnarFleet, args) -> dict:
    weigher = Weigher()
    requests = _requests()
    index.select(requests[0], weigher=weigher, k=args.k)  # warm up
    select, fit = [], []
    for _ in range(args.repeat):
        for r in requests:
            select.append(_timed(lambda: index.select(r, weigher=weigher, k=args.k))[0])
            fit.append(_timed(lambda: index.fit(r))[0])
    limited = [_timed(lambda: index.candidates(r))[0]
               for r in _requests(limit=1000) for _ in range(max(1, args.repeat // 10))]
    # incremental updates: one claim + release, one refresh by generation
    row = int(np.flatnonzero(fleet.trait_set_of != 4)[0])
    rp = fleet.uuids[row]
    claim = {rp: {"VCPU": 1}}
    applies = []
    for _ in range(200):
        t = time.perf_counter()
        index.apply(claim)
        index.apply(claim, sign=-1)
        applies.append(time.perf_counter() - t)
    invs = {rc: Inventory(int(ic.total[i]), int(ic.reserved[i]), int(ic.min_unit[i]),
                          int(ic.max_unit[i]), int(ic.step_size[i]),
                          float(ic.allocation_ratio[i]))
            for rc, ic in fleet.inventories.items()
            for i in np.flatnonzero(ic.rows == row)[:1].tolist()}
    usages = {rc: int(ic.used[np.flatnonzero(ic.rows == row)[0]])
              for rc, ic in fleet.inventories.items() if row in ic.rows}
    refreshes = []
    for gen in range(2, 202):
        rec = ProviderRecord(Provider(rp, rp, gen, rp), invs, usages,
                             fleet.trait_sets[fleet.trait_set_of[row]],
                             fleet.aggregate_sets[fleet.aggregate_set_of[row]])
        refreshes.append(_timed(lambda: index.refresh_provider(rec))[0])
    return {"select": _stats(select), "fit": _stats(fit),
            "candidates_limit_1000": _stats(limited),
            "apply_claim_release_us": 1e6 * statistics.median(applies),
            "refresh_provider_us": 1e6 * statistics.median(refreshes)}


# ---------------------------------------------------------------- baseline
def bench_baseline(fleet: ColumnarFleet, index: CapacityIndex, args) -> dict:
    t, providers = _timed(lambda: reference.from_columnar(fleet))
    ref = reference.Reference(providers)
    multipliers = dict(Weigher().multipliers)
    samples, agree = [], True
    requests = _requests()
    count = max(len(requests), args.baseline_requests)
    for i in range(count):
        r = requests[i % len(requests)]
        dt, top = _timed(lambda: ref.select(r, multipliers, args.k))
        samples.append(dt)
        mine = [(c.root, round(c.weight, 9)) for c in index.select(r, weigher=Weigher(), k=args.k)]
        agree &= mine == [(u, round(w, 9)) for u, w in top]
    return {"select": _stats(samples), "same_top_k": agree, "convert_s": t}


# --------------------------------------------------------------- placement
def load_placement_db(db_path: str, fleet: ColumnarFleet) -> None:
    """Fill a placement database (schema synced, standard traits and classes
    created by the running service) with ``fleet`` through placement's own
    table objects: providers, inventories, aggregates, traits, and one
    consumer per provider holding its usage."""
    import sqlalchemy as sa
    from placement.db.sqlalchemy import models

    engine = sa.create_engine(f"sqlite:///{db_path}")
    T = {m.__tablename__: m.__table__ for m in (
        models.ResourceProvider, models.Inventory, models.Allocation,
        models.PlacementAggregate, models.ResourceProviderAggregate,
        models.ResourceProviderTrait, models.Trait, models.ResourceClass,
        models.Project, models.User, models.Consumer)}
    with engine.begin() as conn:
        rc_id = dict(conn.execute(sa.select(T["resource_classes"].c.name,
                                            T["resource_classes"].c.id)).all())
        trait_id = dict(conn.execute(sa.select(T["traits"].c.name, T["traits"].c.id)).all())
        base = conn.execute(sa.select(sa.func.max(T["resource_providers"].c.id))).scalar() or 0
        ids = [base + 1 + i for i in range(len(fleet))]
        conn.execute(T["resource_providers"].insert(), [
            {"id": i, "uuid": u, "name": f"bench-{u}", "generation": 1,
             "root_provider_id": i, "parent_provider_id": None}
            for i, u in zip(ids, fleet.uuids)])
        inv_rows, alloc_rows = [], []
        consumer_of = [str(__import__("uuid").uuid4()) for _ in ids]
        for rc, ic in fleet.inventories.items():
            for k, row in enumerate(ic.rows.tolist()):
                inv_rows.append({
                    "resource_provider_id": ids[row], "resource_class_id": rc_id[rc],
                    "total": int(ic.total[k]), "reserved": int(ic.reserved[k]),
                    "min_unit": int(ic.min_unit[k]), "max_unit": int(ic.max_unit[k]),
                    "step_size": int(ic.step_size[k]),
                    "allocation_ratio": float(ic.allocation_ratio[k])})
                if ic.used[k]:
                    alloc_rows.append({
                        "resource_provider_id": ids[row], "consumer_id": consumer_of[row],
                        "resource_class_id": rc_id[rc], "used": int(ic.used[k])})
        conn.execute(T["inventories"].insert(), inv_rows)
        conn.execute(T["allocations"].insert(), alloc_rows)
        proj = conn.execute(T["projects"].insert(), [{"external_id": "bench"}])
        user = conn.execute(T["users"].insert(), [{"external_id": "bench"}])
        pid = proj.inserted_primary_key[0] if proj.inserted_primary_key else 1
        uid = user.inserted_primary_key[0] if user.inserted_primary_key else 1
        owners = sorted({a["consumer_id"] for a in alloc_rows})
        if owners:
            conn.execute(T["consumers"].insert(), [
                {"uuid": c, "project_id": pid, "user_id": uid, "generation": 1}
                for c in owners])
        agg_base = conn.execute(sa.select(sa.func.max(
            T["placement_aggregates"].c.id))).scalar() or 0
        agg_ids = {}
        for s in fleet.aggregate_sets:
            for a in sorted(s):
                agg_ids.setdefault(a, agg_base + 1 + len(agg_ids))
        if agg_ids:
            conn.execute(T["placement_aggregates"].insert(),
                         [{"id": i, "uuid": a} for a, i in agg_ids.items()])
        members = [{"resource_provider_id": ids[r], "aggregate_id": agg_ids[a]}
                   for r, s in enumerate(fleet.aggregate_set_of.tolist())
                   for a in fleet.aggregate_sets[s]]
        if members:
            conn.execute(T["resource_provider_aggregates"].insert(), members)
        tagged = [{"resource_provider_id": ids[r], "trait_id": trait_id[t]}
                  for r, s in enumerate(fleet.trait_set_of.tolist())
                  for t in fleet.trait_sets[s]]
        if tagged:
            conn.execute(T["resource_provider_traits"].insert(), tagged)
    engine.dispose()


def bench_placement(fleet: ColumnarFleet, index: CapacityIndex, args) -> dict:
    from scheduler_ext.placement.http import HttpPlacement
    from scheduler_ext.placement.server import LocalPlacement

    server = LocalPlacement()
    url = server.start()
    try:
        client = HttpPlacement.from_url(url, timeout=600)
        client.list_providers()  # the service has synced traits and classes
        db = os.path.join(server._dir, "placement.sqlite")
        load_s, _ = _timed(lambda: load_placement_db(db, fleet))

        def get(request: CandidateRequest) -> dict:
            q = urlencode(request.to_query())
            resp = client._adapter.get(f"/allocation_candidates?{q}",
                                       microversion="1.36", raise_exc=False)
            if resp.status_code != 200:
                raise errors.PlacementError(resp.text, status=resp.status_code)
            return resp.json()

        # parity first: the unlimited answer for one flavor
        probe = _requests()[1]
        same = _allocs(get(probe)) == _allocs(index.candidates(probe))
        samples = []
        for r in _requests(limit=1000):
            for _ in range(args.placement_repeat):
                samples.append(_timed(lambda: get(r))[0])
        return {"get_allocation_candidates": _stats(samples), "load_db_s": load_s,
                "same_candidates_unlimited": same}
    finally:
        server.stop()


def bench_snapshot(fleet: ColumnarFleet, args) -> dict:
    """Reading the fleet for the engine from a real placement: over the API
    (four GETs per provider; timed on 100 providers and scaled up), from its
    database (SqlSnapshot), and the engine's refresh with nothing changed
    and with 100 providers changed, against one GET /allocation_candidates."""
    from scheduler_ext.candidates import EngineCandidateSource
    from scheduler_ext.driver import make_conf
    from scheduler_ext.placement.client import read_provider
    from scheduler_ext.placement.http import HttpPlacement
    from scheduler_ext.placement.server import LocalPlacement

    server = LocalPlacement()
    url = server.start()
    try:
        client = HttpPlacement.from_url(url, timeout=600)
        client.list_providers()
        db = os.path.join(server._dir, "placement.sqlite")
        load_placement_db(db, fleet)
        n = len(fleet)
        list_s, provs = _timed(client.list_providers)
        sample = provs[:100]
        per_s, _ = _timed(lambda: [read_provider(client, p.uuid) for p in sample])
        api_s = list_s + per_s / len(sample) * n
        conf = make_conf(snapshot_source="sql",
                         placement_database_connection=f"sqlite:///{db}")
        initial_s, source = _timed(lambda: EngineCandidateSource(client, conf))
        same = [_timed(source.refresh)[0] for _ in range(3)]
        changed = sample[:100]
        for p in changed:
            gen, invs = client.get_inventories(p.uuid)
            invs = {rc: Inventory(**{**inv.as_dict(), "reserved": inv.reserved + 1})
                    if inv.total > inv.reserved + 1 else inv
                    for rc, inv in invs.items()}
            client.set_inventories(p.uuid, gen, invs)
        changed_s, _ = _timed(source.refresh)
        probe = _requests(limit=1000)[1].to_query()
        ac_s = min(_timed(lambda: client.allocation_candidates(probe))[0]
                   for _ in range(2))
        return {"api_snapshot_s_estimated": api_s, "api_list_providers_s": list_s,
                "sql_initial_load_and_index_s": initial_s,
                "sql_refresh_no_change_s": statistics.median(same),
                "sql_refresh_100_changed_s": changed_s,
                "get_allocation_candidates_s": ac_s}
    finally:
        server.stop()


# --------------------------------------------------------------------- run
def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if v < 1000 else f"{v:.0f}"
    return str(v)


def run_scale_out(args: argparse.Namespace) -> int:
    from scheduler_ext import scaleout
    try:
        counts = [int(w) for w in args.scale_out.split(",") if w.strip()]
    except ValueError:
        print(f"bench: --scale-out takes worker counts, got {args.scale_out!r}",
              file=sys.stderr)
        return 2
    results, bad = [], 0
    base = None
    for n in counts:
        r = scaleout.run_once(n, ops=args.scale_out_ops, seed=args.seed)
        results.append(r)
        base = base or r["decisions_per_s"]
        bad += len(r["problems"])
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
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=_fmt)
    return 1 if bad else 0


def run(args: argparse.Namespace) -> int:
    if args.scale_out:
        return run_scale_out(args)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        print(f"bench: --sizes must be integers, got {args.sizes!r}", file=sys.stderr)
        return 2
    if not sizes or min(sizes) < 10:
        print("bench: sizes must be >= 10", file=sys.stderr)
        return 2
    results = []
    print(f"# scheduler-ext bench, load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} CPUs", flush=True)
    for n in sizes:
        gen_s, fleet = _timed(lambda: synthetic.bench_fleet(n, args.seed))
        build_s, index = _timed(lambda: CapacityIndex.from_columnar(fleet))
        mem = index.memory()
        res: dict[str, Any] = {"providers": n, "sharing": int((fleet.trait_set_of == 4).sum()),
                               "build_s": build_s,
                               "bytes_per_provider_per_class": mem["bytes_per_provider_per_class"],
                               "index_bytes_per_provider": mem["total"] / n}
        res["engine"] = bench_engine(index, fleet, args)
        eng = res["engine"]["select"]["median_ms"]
        if n <= args.baseline_max:
            res["baseline"] = bench_baseline(fleet, index, args)
            res["baseline_x"] = res["baseline"]["select"]["median_ms"] / eng
        if args.placement and n <= args.placement_max:
            res["placement"] = bench_placement(fleet, index, args)
            pm = res["placement"]["get_allocation_candidates"]["median_ms"]
            res["placement_x"] = pm / eng
            res["placement_x_vs_candidates"] = \
                pm / res["engine"]["candidates_limit_1000"]["median_ms"]
        if args.snapshot and n <= args.snapshot_max:
            res["snapshot"] = bench_snapshot(fleet, args)
        results.append(res)
        e = res["engine"]
        line = [f"providers={n}", f"build={build_s:.2f}s",
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
            print(f"  snapshot providers={n}: "
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
    print(f"# load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_average": os.getloadavg(), "results": results}, f,
                      indent=2, default=_fmt)
    return 0
