"""Several scheduler processes on one placement, coordinated only by it.

Each worker process runs its own driver (numpy engine reading placement's
database, the same-host strategy) and its own modelled nova, booting,
resizing, confirming, reverting and deleting servers of its own project on
a shared fleet. Placement runs with several WSGI workers on PostgreSQL (a
multi-writer database), all on 127.0.0.1, deployed as the README says for
several schedulers: ``[placement] allocation_conflict_retry_count = 1``,
so placement never retries an allocation write inside its transaction and
the schedulers' HTTP client re-sends it after ``409
placement.concurrent_update``. (With placement's default of 10, concurrent
claims on one provider can overcommit it: docs/placement-overcommit.rst.)
Afterwards placement is checked: no provider over capacity, usage equal to
the sum of allocations, every server accounted (nothing lost) and no
allocation left that no worker owns. Providers over capacity are listed
under ``overcommit``, the other findings under ``problems``.
"""

from __future__ import annotations

import logging
import multiprocessing
import random
import time
import uuid as uuidlib
from typing import Any, Mapping

from scheduler_ext import errors
from scheduler_ext.lab import fleet, invariants
from scheduler_ext.moves.reconcile import dump_instances, load_instances
from scheduler_ext.driver import SchedulerDriver, make_conf
from scheduler_ext.lab.nova_model import NovaModel
from scheduler_ext.placement.http import HttpPlacement

#: placement.conf for several concurrent writers (see the module docstring)
SEVERAL_WRITERS_CONF = {"placement": {"allocation_conflict_retry_count": 1}}

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
    # The modelled conductor and computes write as nova's report client
    # does: a write lost to a provider-generation race (409
    # placement.concurrent_update) is re-sent 3 times, about 1, 2 and 4 s
    # later (nova's ``retries``: random sleeps of up to 2, 4 and 6 s). With
    # allocation_conflict_retry_count = 1 such answers are common on the
    # sharing providers that most writes touch; the scheduler's own claims
    # move on to the next candidate instead.
    nova_client = HttpPlacement.from_url(url, timeout=300)
    nova_client.retry_delay = 1.0
    model = NovaModel(nova_client, drv.select_destinations,
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
            "write_retries": (client.retried_writes
                              + nova_client.retried_writes),
            "instances": dump_instances(model.states())}


def run_once(workers: int, *, hosts: int = 30, ops: int = 40,
             wsgi_workers: int = 4, wsgi_worker_class: str = "sync",
             wsgi_threads: int = 1,
             placement_conf: Mapping[str, Mapping[str, Any]] | None =
             SEVERAL_WRITERS_CONF, seed: int = 0) -> dict:
    """One run with ``workers`` scheduler processes on a placement of
    ``wsgi_workers`` gunicorn workers of ``wsgi_worker_class`` (``sync`` or
    ``gthread`` with ``wsgi_threads`` threads) and ``placement_conf``;
    returns the figures, the invariant violations found in placement
    afterwards (``problems``) and the providers over capacity
    (``overcommit``)."""
    from scheduler_ext.lab.postgres import LocalPostgres
    from scheduler_ext.lab.placement_server import LocalPlacement

    server = LocalPlacement(workers=wsgi_workers, worker_class=wsgi_worker_class,
                            threads=wsgi_threads, placement_conf=placement_conf)
    with LocalPostgres() as db:
        server.database_url = db
        with server as url:
            return _run_on(url, db, workers, hosts=hosts, ops=ops, seed=seed)


def _run_on(url: str, db: str, workers: int, *, hosts: int, ops: int,
            seed: int) -> dict:
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
    problems, overcommit = _check(client, states)
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


def _check(client: HttpPlacement, states: list) -> tuple[list[str], list[str]]:
    """(invariant problems other than capacity, providers over capacity)."""
    checked = invariants.check_providers(client)
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
    return problems, overcommit
