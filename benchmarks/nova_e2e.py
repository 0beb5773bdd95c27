"""End to end through nova's scheduler: nova's own SchedulerManager (stock)
against scheduler-ext's, on the same fleet, in one run.

For each size: a real placement (openstack-placement 16.0.0, gunicorn on
127.0.0.1) on a private PostgreSQL, filled with ``bench_fleet(n)``; nova's
API and cell databases on the same server (``--nova-database sqlite``:
files), the cell one with a compute node and a nova-compute service for
every compute host; another process writing allocations at ``--rate`` per
second. Each scheduler runs in its own process, started as its service
starts. Stock and ours then answer ``select_destinations`` alternately, for
boots and for resizes with the same host allowed (the conductor's part of
each resize is done first, untimed); every decision ends with its claim.
Each decision is split into refresh (our fleet view) / engine (ours: the
numpy engine; stock: placement's GET /allocation_candidates) / nova's
host states (ours: from the mirror), filters and weighers / claim (the
placement write) / other.
Then the throughput of 1, 2 and 4 scheduler processes (boots).

    .venv/bin/python benchmarks/nova_e2e.py --sizes 1000,10000 --out bench-out

Writes ``e2e.json``, ``e2e.md`` (tables) and ``e2e.png`` (plot) in --out.
Needs the test extra (nova, placement, gunicorn, psycopg2, matplotlib) and
PostgreSQL's server binaries. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nova_cell  # noqa: E402

from scheduler_ext.cmd import common  # noqa: E402
from scheduler_ext.lab import e2e  # noqa: E402
from scheduler_ext.lab import e2e_report  # noqa: E402
from scheduler_ext.placement.http import HttpPlacement  # noqa: E402
from scheduler_ext.nova import request as nova_request  # noqa: E402


def instrument(timer: e2e.PhaseTimer) -> None:
    """Phase timers on the functions each phase goes through."""
    from nova.compute import utils as compute_utils
    from nova import rpc
    from nova.objects import request_spec
    from nova.scheduler import host_manager, request_filter, utils as sched_utils
    from nova.scheduler.client import report
    from scheduler_ext.driver import SchedulerDriver
    from scheduler_ext.nova.early_reads import EarlyReads
    from scheduler_ext.sources.engine import EngineCandidateSource
    from scheduler_ext.sources.fleet_view import FleetView
    timer.wrap(FleetView, "refresh", "refresh")
    timer.wrap(FleetView, "changed", "refresh")
    timer.wrap(EngineCandidateSource, "candidates", "engine")
    timer.wrap(EngineCandidateSource, "move_candidates", "engine")
    timer.wrap(report.SchedulerReportClient, "get_allocation_candidates", "engine")
    # nova's own code only: how ours hands its candidates to nova's filters
    # (``NovaRanking.rank``) is ours and stays in "other"
    host_states_as_list(host_manager.HostManager)
    from scheduler_ext.nova.column_ranking import ColumnRanking
    from scheduler_ext.nova.host_state_view import MirroredHostManager
    from scheduler_ext.nova.vector_weighing import VectorWeighing
    for owner in (host_manager.HostManager, MirroredHostManager):
        timer.wrap(owner, "get_host_states_by_uuids", "states")
    # ours on columns: the columns refreshed and the hosts in nova's order,
    # nova's filters, nova's weighers
    timer.wrap(ColumnRanking, "candidate_rows", "states")
    timer.wrap(ColumnRanking, "hosts", "states")
    timer.wrap(ColumnRanking, "filtered", "filters")
    timer.wrap(ColumnRanking, "weights", "weighers")
    timer.wrap(ColumnRanking, "best_first", "weighers")
    timer.wrap(ColumnRanking, "head_first", "weighers")
    timer.wrap(ColumnRanking, "place", "weighers")
    # ours runs nova's filters on arrays inside nova's get_filtered_hosts
    # (the host manager's filter_handler): timed as "filters" too
    timer.wrap(host_manager.HostManager, "get_filtered_hosts", "filters")
    # ours runs nova's weighers on arrays instead of get_weighed_hosts
    timer.wrap(host_manager.HostManager, "get_weighed_hosts", "weighers")
    timer.wrap(VectorWeighing, "weighed_hosts", "weighers")
    # nova's request preparation, which stock and ours both run
    timer.wrap(request_filter, "process_reqspec", "prep")
    timer.wrap(sched_utils, "resources_from_request_spec", "prep")
    timer.wrap(compute_utils, "notify_about_scheduler_action", "prep")
    timer.wrap(rpc.LegacyValidatingNotifier, "_notify", "prep")
    timer.wrap(request_spec.RequestSpec, "to_legacy_request_spec_dict", "prep")
    timer.wrap(sched_utils, "claim_resources", "claim")
    timer.wrap(HttpPlacement, "post_allocations", "claim")
    timer.wrap(HttpPlacement, "get_consumer", "reads")
    timer.wrap(nova_request, "find_move", "reads")
    # ours starts its refresh and a move's look-up as the call arrives, on
    # worker threads (nova.early_reads): what the decision's thread still
    # waits for is what it costs
    timer.wrap(EarlyReads, "refreshed", "refresh")
    # ... and, inside nova's request filters, for the host states' refresh
    # that answers their minimum compute version (``compute_version``)
    timer.carve(EarlyReads, "compute_version", "refresh")
    timer.wrap(EarlyReads, "move", "reads")
    # ... and the CPU time those reads take on the workers
    timer.wrap_background(SchedulerDriver, "refresh", "refresh")
    from scheduler_ext.nova.host_state_view import HostStateView
    timer.wrap_background(HostStateView, "refresh_cells", "states")
    timer.wrap_background(nova_request, "find_move", "reads")


def host_states_as_list(host_manager_cls) -> None:
    """nova's ``get_host_states_by_uuids`` returns a generator over the host
    states it has built: taking them is nova's own look-ups, which stock
    runs inside its filters (timed as *nova*) and ours in its own loop. The
    timed call returns them as a list, for both schedulers alike."""
    original = host_manager_cls.get_host_states_by_uuids

    def as_list(self, *args, **kwargs):
        return list(original(self, *args, **kwargs))

    host_manager_cls.get_host_states_by_uuids = as_list


@contextlib.contextmanager
def instance_info_in_foreground():
    """nova's HostManager reads every host's instances when it is built, in
    a background thread (one query per 10 hosts: minutes at 100,000 hosts).
    A scheduler that has been up for a while has finished it; run it in the
    foreground here so that no decision is timed beside it."""
    from nova.scheduler import host_manager
    with mock.patch.object(host_manager.thread_pool_factory, "spawn",
                           lambda fn, *args, **kwargs: fn(*args, **kwargs)):
        yield


def managers(db_url: str, which: tuple[str, ...], hosts) -> dict:
    """nova's SchedulerManager and ours, built as their services build them
    (ours reads the fleet here, not in the first request; nova's start-up
    read of every host's instances is waited for), with every host's
    instance list reported (as nova-compute does)."""
    from nova import context as nova_context
    from nova.scheduler import manager as nova_manager
    from scheduler_ext.nova import manager as ext_manager
    from scheduler_ext.nova import service as ext_service
    out = {}
    for name in which:
        if name == "stock":
            with instance_info_in_foreground():
                mgr = nova_manager.SchedulerManager()
        else:
            ext_service.register_opts(nova_cell.CONF)
            nova_cell.CONF.set_override("placement_database_connection", db_url,
                                        "scheduler_ext")
            nova_cell.CONF.set_override("reconcile_interval", 0, "scheduler_ext")
            with instance_info_in_foreground():
                mgr = ext_manager.SchedulerManager()
            mgr.post_start_hook()       # the fleet's full read, as the service starts
        mgr.host_manager._instance_info = {
            h: {"instances": {}, "updated": True} for h, _ in hosts}
        out[name] = mgr
    out["ctx"] = nova_context.get_admin_context()
    return out


def _chosen(out) -> str | None:
    return None if isinstance(out, Exception) else out[0][0].compute_node_uuid


@dataclasses.dataclass(frozen=True)
class OursOptions:
    """What ours' ``[scheduler_ext]`` sets beside its defaults: ``host_limit``
    as ``nova_host_limit`` for ``ours-limit``, and the host-state refresh
    interval for both."""

    host_limit: int = 0
    host_state_refresh_interval: float = 0.0


def scheduler_service(workdir: str, url: str, db_url: str, databases, sched: str,
                      options: OursOptions, instrumented: bool):
    """(managers as ``managers`` returns them, phase timer or None) for
    ``sched`` in this process, built as its service builds it, with
    ``options`` in ours' configuration."""
    nova_cell.configure(workdir, url, databases)
    hosts = json.load(open(os.path.join(workdir, "hosts.json")))
    timer = None
    if instrumented:
        timer = e2e.PhaseTimer()
        instrument(timer)
    name = sched.split("-")[0]
    if name == "ours":
        from scheduler_ext.nova import service as ext_service
        ext_service.register_opts(nova_cell.CONF)
        nova_cell.CONF.set_override("host_state_refresh_interval",
                                    options.host_state_refresh_interval, "scheduler_ext")
    if sched == "ours-limit":
        nova_cell.CONF.set_override("nova_host_limit", options.host_limit, "scheduler_ext")
    mgrs = managers(db_url, (name,), hosts)
    return mgrs, timer


def _serve(conn, workdir: str, url: str, db_url: str, databases, sched: str,
           options: OursOptions) -> None:
    """One scheduler's process (as deployed: nothing of the others' heaps,
    collections or caches in it). Answers the parent's commands:
    ("decide", (instance, flavor, resize)) -> (phases, chosen host uuid,
    error); ("compare", (samples, limit, seed)); ("report", None);
    ("stop", None)."""
    logging.basicConfig(level=getattr(logging, os.environ.get("E2E_LOG", "WARNING")))
    started = time.perf_counter()
    mgrs, timer = scheduler_service(workdir, url, db_url, databases, sched, options,
                                    instrumented=True)
    ours = mgrs.get("ours")
    ready = {"start_s": time.perf_counter() - started}
    if ours is not None:
        view = ours.ext.scheduler().driver.upkeep
        ready.update(full_read_s=view.full_read_s, source=view.source.name)
    conn.send(ready)
    ctx, select = mgrs["ctx"], mgrs[sched.split("-")[0]].select_destinations
    while True:
        command, arg = conn.recv()
        if command == "decide":
            inst, flavor, resize = arg
            spec = nova_cell.request_spec(ctx, inst, flavor, resize=resize)
            phases, out = timer.decision(lambda: select(
                ctx, spec_obj=spec, instance_uuids=[inst], return_objects=True,
                return_alternates=True))
            if ours is not None:
                # ours drops the call's nova host states in a thread after
                # answering; wait for it untimed, so that it never falls in
                # the next decision's timing (the throughput runs do not wait)
                ours.ext.scheduler().drop.drain()
            conn.send((phases, _chosen(out),
                       repr(out)[:300] if isinstance(out, Exception) else None))
        elif command == "compare":
            conn.send(choice_against_nova(mgrs, *arg))
        elif command == "report":
            driver = ours.ext.scheduler().driver
            conn.send({"view": dict(driver.upkeep.stats),
                       "claims": dict(driver.strategy.stats),
                       "memory": driver.upkeep.memory()})
        else:
            return


class SchedulerProcesses:
    """One process per scheduler, each started as its service starts (all
    at once); ``ask`` sends one a command and waits for its answer."""

    def __init__(self, workdir: str, url: str, db_url: str, databases,
                 scheds: tuple[str, ...], options: OursOptions) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conns, self.procs, self.ready = {}, {}, {}
        for sched in scheds:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, name=f"scheduler-{sched}", args=(
                child, workdir, url, db_url, databases, sched, options))
            proc.start()
            child.close()
            self.conns[sched], self.procs[sched] = parent, proc
        for sched in scheds:
            self.ready[sched] = self._answer(sched)

    def _answer(self, sched: str):
        try:
            return self.conns[sched].recv()
        except EOFError:
            self.procs[sched].join(5)
            raise SystemExit(f"the {sched} scheduler's process ended (exit status "
                             f"{self.procs[sched].exitcode}); its error is above") from None

    def ask(self, sched: str, command: str, arg=None):
        self.conns[sched].send((command, arg))
        return self._answer(sched)

    def close(self) -> None:
        for sched, conn in self.conns.items():
            with contextlib.suppress(OSError):
                conn.send(("stop", None))
        for proc in self.procs.values():
            proc.join(30)
            if proc.is_alive():
                proc.kill()


def latency(procs: SchedulerProcesses, ctx, client: HttpPlacement, cell_db: str,
            hosts, decisions: int, seed: int, scheds: tuple[str, ...]) -> dict:
    """Alternate ``scheds`` (stock, ours, ours with nova_host_limit), each
    in its own process: boots, then same-host-allowed resizes. The
    conductor's part of a resize is done here first, untimed."""
    rng = random.Random(seed)
    samples: dict = {f"{s}/{k}": [] for s in scheds for k in ("boot", "resize")}
    outcomes: dict = {k: {"no_valid_host": 0, "same_host": 0} for k in samples}
    for i in range(decisions):
        for kind in ("boot", "resize"):
            for sched in scheds:
                inst = str(uuidlib.uuid4())
                if kind == "resize":
                    inst = None
                    while inst is None:
                        src = rng.choice(hosts)
                        inst = nova_cell.start_resize(ctx, client, cell_db, src,
                                                      "small", "medium")
                flavor = "medium" if kind == "resize" else rng.choice(list(nova_cell.FLAVORS))
                phases, chosen, error = procs.ask(
                    sched, "decide", (inst, flavor, kind == "resize"))
                key = f"{sched}/{kind}"
                samples[key].append(phases)
                if error is not None:
                    outcomes[key]["no_valid_host"] += 1
                    outcomes[key].setdefault("errors", []).append(error)
                elif kind == "resize" and chosen == src[1]:
                    outcomes[key]["same_host"] += 1
                nova_cell.finish_resize(client, cell_db, inst)
    return {"samples": samples, "outcomes": outcomes}


def choice_against_nova(mgrs: dict, samples: int, limit: int, seed: int) -> dict:
    """For boots of random flavors (nothing is claimed): whether ours'
    pick (nova's filters and weighers on the host-state columns over every
    host that fits, or where a request cannot be, on objects over the
    engine's best ``max_placement_results``) and the pick with
    ``nova_host_limit = limit`` (on objects) are a host nova's own code
    ranks first over every host that
    fits (its ``HostFilterHandler`` and ``get_weighed_hosts``; a tie at the
    top weight counts as nova's pick). ``ranks``: each pick's place in
    nova's order (1 = nova's pick; past the end: not kept by nova)."""
    from nova.scheduler import filters as nova_filters, request_filter
    from scheduler_ext.nova import request as nova_request
    from scheduler_ext.nova.ranking import UNLIMITED, NovaRanking
    from scheduler_ext.sources.base import ranked, roots_of
    rng = random.Random(seed)
    ctx, mgr = mgrs["ctx"], mgrs["ours"]
    hm = mgr.host_manager
    source = mgr.ext.scheduler().driver.source
    novas_filters = nova_filters.HostFilterHandler()
    out: dict = {"samples": samples, "limit": limit, "matches": {}, "ranks": {}}
    for _ in range(samples):
        spec = nova_cell.request_spec(ctx, str(uuidlib.uuid4()),
                                      rng.choice(list(nova_cell.FLAVORS)))
        request_filter.process_reqspec(ctx, spec)
        query = nova_request.parse_query(
            nova_request.placement_query(ctx, spec, hm))
        mgr.ext.scheduler().driver.upkeep.refresh()
        every = list(dict.fromkeys(roots_of(source.candidates(query, limit=UNLIMITED))))
        states = list(hm.get_host_states_by_uuids(ctx, every, spec))
        passed = novas_filters.get_filtered_objects(hm.enabled_filters, states, spec, 0)
        weighed = hm.get_weighed_hosts(passed or [], spec)
        order = [w.obj.uuid for w in weighed]
        top = {w.obj.uuid for w in weighed if weighed and w.weight == weighed[0].weight}
        for name, k in (("ours", query.limit), ("ours-limit", limit)):
            ranking = NovaRanking(ctx, spec, hm, k, on_columns=name == "ours")
            best = ranked(source.candidates(query, limit=ranking.limit), ranking)
            pick = best[0].root if best else None
            out["matches"][name] = out["matches"].get(name, 0) + (
                pick in top if top else pick is None)
            out["ranks"].setdefault(name, []).append(
                1 if pick in top else order.index(pick) + 1 if pick in order
                else len(order) + 1)
    return out


def _throughput_worker(args: tuple) -> int:
    workdir, url, db_url, databases, sched, seconds, start_at, seed, options = args
    logging.basicConfig(level=logging.ERROR)
    mgrs, _ = scheduler_service(workdir, url, db_url, databases, sched, options,
                                instrumented=False)
    select = mgrs[sched.split("-")[0]].select_destinations
    client = HttpPlacement.from_url(url, timeout=120)
    rng = random.Random(seed)
    time.sleep(max(0.0, start_at - time.time()))
    done, made = 0, []
    end = time.time() + seconds
    while time.time() < end:
        inst = str(uuidlib.uuid4())
        spec = nova_cell.request_spec(mgrs["ctx"], inst, rng.choice(list(nova_cell.FLAVORS)))
        try:
            select(mgrs["ctx"], spec_obj=spec, instance_uuids=[inst],
                   return_objects=True, return_alternates=True)
            made.append(inst)
        except Exception:
            pass
        done += 1
    for inst in made:
        client.delete_allocations(inst)
    return done


def throughput(workdir: str, url: str, db_url: str, databases: tuple[str, str],
               workers: list[int], seconds: float, startup: float,
               scheds: tuple[str, ...], options: OursOptions = OursOptions()) -> dict:
    """Decisions per second with k scheduler processes of each of
    ``scheds``."""
    out: dict = {}
    ctx = multiprocessing.get_context("spawn")
    for sched in scheds:
        for k in workers:
            start_at = time.time() + startup
            with ctx.Pool(k) as pool:
                counts = pool.map(_throughput_worker, [
                    (workdir, url, db_url, databases, sched, seconds, start_at, 100 + j,
                     options)
                    for j in range(k)])
            out[f"{sched}/{k}"] = sum(counts) / seconds
            print(f"  throughput {sched} x{k}: {out[f'{sched}/{k}']:.2f} decisions/s",
                  flush=True)
    return out


def nova_fleet(n: int, seed: int):
    """``bench_fleet`` with what nova-compute reports on its compute node
    providers: the OWNER_NOVA trait (nova 34 asks for it on the root)."""
    from scheduler_ext.lab.synthetic import bench_fleet
    from scheduler_ext.placement.model import SHARING_TRAIT
    fleet = bench_fleet(n, seed)
    fleet.trait_sets = [s if SHARING_TRAIT in s else s | {"OWNER_NOVA"}
                        for s in fleet.trait_sets]
    return fleet


def run_size(n: int, args: argparse.Namespace) -> dict:
    from nova import context as nova_context
    with e2e.loaded_placement(n, "postgresql", args.seed, wsgi_workers=args.wsgi_workers,
                              fleet=nova_fleet(n, args.seed)) \
            as (url, db_url, fleet), \
            tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as workdir:
        databases = (nova_cell.server_databases(db_url)
                     if args.nova_database == "postgresql" else None)
        api_db, cell_db = nova_cell.configure(workdir, url, databases)
        disabled = {r for r in range(len(fleet)) if "COMPUTE_STATUS_DISABLED"
                    in fleet.trait_sets[fleet.trait_set_of[r]]}
        hosts = nova_cell.create_databases(api_db, cell_db, fleet, disabled)
        json.dump(hosts, open(os.path.join(workdir, "hosts.json"), "w"))
        options = OursOptions(args.host_limit, args.host_state_refresh_interval)
        procs = SchedulerProcesses(workdir, url, db_url, (api_db, cell_db),
                                   args.schedulers, options)
        try:
            ours = procs.ready["ours"]
            result: dict = {"providers": n, "compute_hosts": len(hosts),
                            "nova_database": args.nova_database,
                            "host_state_refresh_interval":
                                args.host_state_refresh_interval,
                            "start_s": ours["start_s"], "full_read_s": ours["full_read_s"],
                            "source": ours["source"]}
            client = HttpPlacement.from_url(url, timeout=600)
            live = [h for h in hosts if int(h[0].split("-")[1]) not in disabled]
            with e2e.other_writers(url, [h[1] for h in live], args.rate) as writes:
                t0 = time.perf_counter()
                result.update(latency(procs, nova_context.get_admin_context(), client,
                                      cell_db, live, args.decisions, args.seed,
                                      args.schedulers))
                if "ours" in args.schedulers and args.compare:
                    result["choice_against_nova"] = procs.ask(
                        "ours", "compare", (args.compare, args.host_limit, args.seed))
                result["other_writes_per_s"] = writes.value / (time.perf_counter() - t0)
                result.update(procs.ask("ours", "report"))
        finally:
            procs.close()
        if args.workers:
            with e2e.other_writers(url, [h[1] for h in live], args.rate):
                result["throughput"] = throughput(
                    workdir, url, db_url, (api_db, cell_db), args.workers,
                    args.throughput_seconds,
                    startup=max(10.0, 3 * result["full_read_s"] + 5),
                    scheds=args.schedulers, options=options)
        return result


#: the smallest fleet a run accepts (providers; about 1% are shared pools)
MIN_SIZE = 100


def _workers(text: str) -> list[int]:
    """--workers: scheduler process counts, or '' (no throughput run)."""
    return common.count_list(1)(text) if text.strip() else []


def main(argv: list[str] | None = None) -> int:
    """Every flag is checked before any service starts (one line, exit 2)."""
    parser = common.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=common.count_list(MIN_SIZE), default="1000,10000",
                        help=f"providers per run, comma-separated, each >= {MIN_SIZE}")
    parser.add_argument("--decisions", type=common.count(1), default=30,
                        help="decisions per scheduler and kind (default %(default)s)")
    parser.add_argument("--rate", type=common.number(0.0), default=10.0,
                        help="other writers' allocation writes per second")
    parser.add_argument("--workers", type=_workers, default="1,2,4",
                        help="scheduler processes for the throughput figure ('' skips)")
    parser.add_argument("--throughput-seconds", type=common.number(1.0), default=20.0)
    parser.add_argument("--host-limit", type=common.count(0), default=20,
                        help="also run ours with [scheduler_ext] nova_host_limit = this "
                             "(0 skips)")
    parser.add_argument("--host-state-refresh-interval", type=common.number(0.0),
                        default=0.0,
                        help="ours' [scheduler_ext] host_state_refresh_interval, "
                             "seconds (default %(default)s: nova's host states "
                             "asked for what changed before every request)")
    parser.add_argument("--schedulers", default="stock,ours,ours-limit",
                        help="which schedulers to run (default %(default)s; "
                             "leave stock out where it is too slow)")
    parser.add_argument("--compare", type=common.count(0), default=20,
                        help="boots on which ours' picks are compared with nova's "
                             "own code over every host that fits (default "
                             "%(default)s)")
    parser.add_argument("--wsgi-workers", type=common.count(1), default=2)
    parser.add_argument("--nova-database", choices=("postgresql", "sqlite"),
                        default="postgresql",
                        help="where nova's API and cell databases live (default "
                             "%(default)s: the placement database's server)")
    parser.add_argument("--seed", type=common.count(0), default=0)
    parser.add_argument("--out", type=common.writable_dir, default="bench-out")
    args = parser.parse_args(argv)
    args.schedulers = tuple(s for s in args.schedulers.split(",")
                            if s and (s != "ours-limit" or args.host_limit))
    unknown = set(args.schedulers) - {"stock", "ours", "ours-limit"}
    if unknown or "ours" not in args.schedulers:
        parser.error(f"--schedulers: {args.schedulers!r} must name ours, and "
                     "only stock, ours and ours-limit")
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as exc:
        parser.error(f"--out: {args.out}: {exc.strerror}")
    logging.basicConfig(level=getattr(logging, os.environ.get("E2E_LOG", "WARNING")))
    sizes = args.sizes
    if len(sizes) > 1:   # nova's database set-up is once per process
        given = argv if argv is not None else sys.argv[1:]
        for n in sizes:
            rest = [a for i, a in enumerate(given) if not a.startswith("--sizes")
                    and (i == 0 or given[i - 1] != "--sizes")]
            rest += ["--sizes", str(n)]
            code = subprocess.run([sys.executable, os.path.abspath(__file__)] + rest).returncode
            if code:    # that size's run has said why
                return code
        return 0
    print(f"size {sizes[0]}", flush=True)
    results = e2e_report.load(args.out)
    results = [r for r in results if r["providers"] != sizes[0]]
    results.append(run_size(sizes[0], args))
    results.sort(key=lambda r: r["providers"])
    e2e_report.write(results, args.out)
    print(e2e_report.table(results), flush=True)
    return 0


if __name__ == "__main__":
    # SIGTERM as Ctrl-C: the placement, PostgreSQL and scheduler processes
    # a run started are stopped on the way out (a killed run left them)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("nova_e2e: interrupted", file=sys.stderr)
        sys.exit(130)
