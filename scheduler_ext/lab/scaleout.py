"""Several scheduler processes on one placement, coordinated only by it.

Each worker process runs its own driver (numpy engine reading placement's
database, the same-host strategy) and its own modelled nova, booting,
resizing, confirming, reverting and deleting servers of its own project on
a shared fleet. Placement runs with several WSGI workers on PostgreSQL (a
multi-writer database), all on 127.0.0.1. Afterwards placement is checked:
no provider over capacity, usage equal to the sum of allocations, every
server accounted (nothing lost) and no allocation left that no worker
owns. Providers over capacity are reported apart: every claim is placement's
own atomic capacity check, and openstack-placement 16.0.0 on PostgreSQL
with several WSGI workers lets concurrent claims on one provider
overcommit it (16 concurrent 1-VCPU claims on an 8-VCPU provider: 9 or 10
succeed, without scheduler-ext involved); with one WSGI worker it does not.
"""

from __future__ import annotations

import logging
import multiprocessing
import random
import time
import uuid as uuidlib

from scheduler_ext import errors
from scheduler_ext.lab import fleet, invariants
from scheduler_ext.moves.reconcile import dump_instances, load_instances
from scheduler_ext.driver import SchedulerDriver, make_conf
from scheduler_ext.lab.nova_model import NovaModel
from scheduler_ext.placement.http import HttpPlacement

FLAVORS = ({"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20},
           {"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 40},
           {"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80})


def _worker(job: tuple) -> dict:
    url, db, worker, ops, seed = job
    # nova's modelled compute logs an expected error on some reverts
    logging.basicConfig(level=logging.CRITICAL)
    rng = random.Random(seed * 1000 + worker)
    client = HttpPlacement.from_url(url, timeout=300)
    drv = SchedulerDriver(client, make_conf(
        snapshot_source="sql", placement_database_connection=db))
    model = NovaModel(client, drv.select_destinations,
                      project_id=f"worker-{worker}", user_id=f"worker-{worker}",
                      uuid_factory=lambda: str(uuidlib.UUID(
                          int=rng.getrandbits(128), version=4)))
    decisions = no_host = 0
    start = time.perf_counter()
    for _ in range(ops):
        servers = sorted(model.servers)
        moving = [u for u in servers if model.servers[u].active]
        still = [u for u in servers if not model.servers[u].active]
        op = rng.choices(("boot", "resize", "finish", "delete"), (45, 30, 20, 5))[0]
        try:
            if op == "boot" or (op == "resize" and not still):
                model.boot(rng.choice(FLAVORS))
                decisions += 1
            elif op == "resize":
                model.resize(rng.choice(still), rng.choice(FLAVORS))
                decisions += 1
            elif op == "finish" and moving:
                (model.confirm if rng.random() < 0.6 else model.revert)(
                    rng.choice(moving))
            elif op == "delete" and servers:
                model.delete(rng.choice(servers))
        except errors.NoValidHost:
            no_host += 1
    return {"worker": worker, "seconds": time.perf_counter() - start,
            "decisions": decisions, "no_valid_host": no_host,
            "claims": drv.strategy.stats["claims"],
            "conflicts": drv.strategy.stats["conflicts"],
            "write_retries": client.retried_writes,
            "instances": dump_instances(model.states())}


def run_once(workers: int, *, hosts: int = 30, ops: int = 40,
             wsgi_workers: int = 4, seed: int = 0) -> dict:
    """One run with ``workers`` scheduler processes; returns the figures
    and the list of invariant violations found in placement afterwards."""
    from scheduler_ext.lab.postgres import LocalPostgres
    from scheduler_ext.lab.placement_server import LocalPlacement

    with LocalPostgres() as db, \
            LocalPlacement(workers=wsgi_workers, database_url=db) as url:
        client = HttpPlacement.from_url(url, timeout=300)
        fleet.build(client, hosts=hosts, sharing=2, vcpus=8, memory_mb=32768,
                    disk_gb=800, shared_disk_gb=6000, cpu_ratio=1.0, seed=seed)
        jobs = [(url, db, w, ops, seed) for w in range(workers)]
        start = time.perf_counter()
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(workers) as pool:
            results = pool.map(_worker, jobs)
        wall = time.perf_counter() - start
        states = [s for r in results for s in load_instances(r["instances"])]
        checked = invariants.check_providers(client)
        # placement's own capacity check: measured, kept apart (see below)
        overcommit = [p for p in checked if "exceeds capacity" in p]
        problems = [p for p in checked if p not in overcommit]
        problems += invariants.check_servers(client, states, exact=False)
        owned = {s.uuid for s in states} | {
            m.migration_uuid for s in states for m in s.moves}
        for prov in client.list_providers():
            for consumer in client.get_provider_allocations(prov.uuid):
                if consumer not in owned:
                    problems.append(f"{consumer} on {prov.name} is owned by "
                                    "no worker")
    decisions = sum(r["decisions"] for r in results)
    claims = sum(r["claims"] for r in results)
    return {"workers": workers, "wall_s": wall, "decisions": decisions,
            "decisions_per_s": decisions / wall,
            "no_valid_host": sum(r["no_valid_host"] for r in results),
            "claims": claims, "conflicts": sum(r["conflicts"] for r in results),
            "conflict_rate": sum(r["conflicts"] for r in results) / max(1, claims),
            "write_retries": sum(r["write_retries"] for r in results),
            "servers": len(states), "problems": problems,
            "overcommit": overcommit}
