"""What the fleet view costs per request, on a real placement.

For a fleet of ``n`` providers in a real placement (sqlite or PostgreSQL,
filled through placement's own tables) this measures, with the ``sql``
source: the full read at start, the request-path refresh with nothing
changed, the refresh after ``changed`` providers received allocations
through placement's API (new consumers, as other schedulers' claims do),
the background re-read, the index memory and what change tracking keeps.
Nothing here asserts a timing.
"""

from __future__ import annotations

import contextlib
import math
import random
import statistics
import time
import uuid as uuidlib
from typing import Iterator

from scheduler_ext.driver import make_conf
from scheduler_ext.engine.fleet.columnar import ColumnarFleet
from scheduler_ext.lab.bench_engine import timed
from scheduler_ext.lab.placement_db import load_placement_db
from scheduler_ext.lab.placement_server import LocalPlacement
from scheduler_ext.lab.postgres import LocalPostgres
from scheduler_ext.lab.synthetic import bench_fleet
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.sources.fleet_view import FleetView


@contextlib.contextmanager
def loaded_placement(n: int, database: str, seed: int = 0, wsgi_workers: int = 1,
                     fleet: ColumnarFleet | None = None
                     ) -> Iterator[tuple[str, str, ColumnarFleet]]:
    """``(placement url, database url, fleet)``: a real placement on
    127.0.0.1 holding ``fleet`` (default ``bench_fleet(n, seed)``);
    ``database`` is ``sqlite`` or ``postgresql`` (a private server)."""
    with contextlib.ExitStack() as stack:
        db_url = stack.enter_context(LocalPostgres()) if database == "postgresql" else None
        server = LocalPlacement(database_url=db_url, workers=wsgi_workers)
        url = server.start()
        stack.callback(server.stop)
        HttpPlacement.from_url(url).list_providers()  # standard traits, classes
        fleet = fleet if fleet is not None else bench_fleet(n, seed)
        load_placement_db(server.database_url or "", fleet)
        yield url, server.database_url or "", fleet


def _write_changes(client: HttpPlacement, hosts: list[str], rng: random.Random,
                   k: int) -> list[str]:
    """``k`` new one-VCPU consumers on ``k`` distinct hosts (skipping full
    ones); returns the hosts written."""
    written: list[str] = []
    for host in rng.sample(hosts, min(len(hosts), 3 * k)):
        if len(written) == k:
            break
        try:
            client.put_allocations(str(uuidlib.UUID(int=rng.getrandbits(128), version=4)),
                                   AllocationWrite({host: {"VCPU": 1}}, "bench", "bench", None))
            written.append(host)
        except Exception:   # a full host: take another
            continue
    return written


def refresh_cost(n: int, database: str = "sqlite", changed: int = 100,
                 rounds: int = 3, seed: int = 0) -> dict:
    """The figures described in the module docstring, in seconds and bytes."""
    rng = random.Random(seed)
    with loaded_placement(n, database, seed) as (url, db, fleet):
        client = HttpPlacement.from_url(url, timeout=600)
        conf = make_conf(snapshot_source="sql", placement_database_connection=db,
                         reread_interval=0.0)
        full_s, view = timed(lambda: FleetView(client, conf))
        view.refresh()
        idle = [timed(view.refresh)[0] for _ in range(10)]
        hosts = [fleet.uuids[r] for r in fleet.inventories["VCPU"].rows.tolist()]
        after, cpu, seen = [], [], []
        for _ in range(rounds):
            written = _write_changes(client, hosts, rng, changed)
            before = view.stats["polled_providers"]
            cpu0 = time.process_time()
            after.append(timed(view.refresh)[0])
            cpu.append(time.process_time() - cpu0)
            seen.append(view.stats["polled_providers"] - before - len(written))
        reread_s, _ = timed(view.reread)
        mem = view.memory()
        return {
            "providers": n, "database": database, "full_read_s": full_s,
            "refresh_idle_ms": 1e3 * statistics.median(idle),
            "refresh_changed_ms": 1e3 * statistics.median(after),
            "refresh_changed_max_ms": 1e3 * max(after), "changed": changed,
            "refresh_changed_p99_ms": 1e3 * percentile(after, 99),
            "refresh_changed_cpu_ms": 1e3 * statistics.median(cpu),
            "extra_providers_read": max(seen), "reread_s": reread_s,
            "index_bytes_per_provider_per_class": mem["bytes_per_provider_per_class"],
            "index_bytes": mem["total"], "tracking_bytes": mem["tracking"]}


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile of ``values`` (the maximum
    when there are fewer than 100 / (100 - q) values)."""
    ordered = sorted(values)
    rank = math.ceil(len(ordered) * q / 100)
    return ordered[max(0, min(len(ordered), rank) - 1)]


def format_row(r: dict) -> str:
    return (f"{r['providers']:>7} {r['database']:<10} full read {r['full_read_s']:6.2f} s  "
            f"refresh idle {r['refresh_idle_ms']:6.2f} ms  "
            f"{r['changed']} changed p50 {r['refresh_changed_ms']:6.2f} ms "
            f"(p99 {r['refresh_changed_p99_ms']:.2f}, cpu {r['refresh_changed_cpu_ms']:.2f})  "
            f"re-read {r['reread_s']:5.2f} s  "
            f"index {r['index_bytes_per_provider_per_class']:.0f} B/provider/class, "
            f"tracking {r['tracking_bytes'] / 1024:.0f} KiB")
