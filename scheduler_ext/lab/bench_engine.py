"""The measurements behind ``scheduler-ext bench`` (the command's options
and output are in ``scheduler_ext.cmd.bench``): the engine, a plain-Python
baseline on the same fleet, a real placement, and reading the fleet from a
real placement. Each returns a dict of figures; nothing asserts a time."""

from __future__ import annotations

import os
import statistics
import time
import uuid as uuidlib
from typing import Any, Callable

import numpy as np

from scheduler_ext import errors
from scheduler_ext.engine import CapacityIndex, Weigher
from scheduler_ext.engine.fleet.columnar import ColumnarFleet
from scheduler_ext.lab import reference
from scheduler_ext.lab.nested import EGR, IGR
from scheduler_ext.lab.nested_bench import PORT
from scheduler_ext.lab.placement_db import load_placement_db
from scheduler_ext.placement.model import (AllocationWrite, Inventory, Provider,
                                           ProviderRecord)
from scheduler_ext.placement.query import CandidateRequest, RequestGroup

#: (VCPU, MEMORY_MB, DISK_GB) of the flavors each round asks for.
FLAVORS = ((1, 2048, 20), (2, 4096, 40), (4, 8192, 80), (8, 16384, 160), (16, 65536, 320))


def flavor_requests(limit: int | None = None) -> list[CandidateRequest]:
    return [CandidateRequest({"VCPU": c, "MEMORY_MB": m, "DISK_GB": d},
                             root_forbidden=frozenset(["COMPUTE_STATUS_DISABLED"]), limit=limit)
            for c, m, d in FLAVORS]


def port_requests(limit: int | None = None, *, vgpu: bool = False
                  ) -> list[CandidateRequest]:
    """The bench flavors (``FLAVORS``) each with one granular
    group: a QoS port's bandwidth on physnet NET0, or (``vgpu``) one vGPU."""
    group = RequestGroup("_GPU", {"VGPU": 1},
                         required=frozenset(["CUSTOM_VGPU_TYPE_A"])) if vgpu \
        else RequestGroup(PORT, {EGR: 1000, IGR: 1000}, required=frozenset(
            ["CUSTOM_PHYSNET_NET0", "CUSTOM_VNIC_TYPE_NORMAL"]))
    return [CandidateRequest({"VCPU": c, "MEMORY_MB": m, "DISK_GB": d},
                             root_forbidden=frozenset(["COMPUTE_STATUS_DISABLED"]),
                             limit=limit,
                             granular=(group,), group_policy="none")
            for c, m, d in FLAVORS]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def stats(samples: list[float]) -> dict[str, float]:
    ms = sorted(1e3 * s for s in samples)
    p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]
    return {"median_ms": statistics.median(ms), "p99_ms": p99, "n": len(ms)}


def _allocs(answer: dict) -> set:
    return {frozenset((rp, rc, n) for rp, v in a["allocations"].items()
                      for rc, n in v["resources"].items())
            for a in answer["allocation_requests"]}


# ------------------------------------------------------------------ engine
def time_select_and_fit(index: CapacityIndex, requests: list, weigher: Weigher,
                        args) -> tuple[list[float], list[float]]:
    """Seconds of each ``select`` (best ``args.k``) and each ``fit``, every
    request ``args.repeat`` times, after one warm-up select."""
    index.select(requests[0], weigher=weigher, k=args.k)
    select, fit = [], []
    for _ in range(args.repeat):
        for r in requests:
            select.append(timed(lambda: index.select(r, weigher=weigher, k=args.k))[0])
            fit.append(timed(lambda: index.fit(r))[0])
    return select, fit


def bench_engine(index: CapacityIndex, fleet: ColumnarFleet, args) -> dict:
    weigher = Weigher()
    requests = flavor_requests()
    select, fit = time_select_and_fit(index, requests, weigher, args)
    limited = [timed(lambda: index.candidates(r))[0]
               for r in flavor_requests(limit=1000) for _ in range(max(1, args.repeat // 10))]
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
        refreshes.append(timed(lambda: index.refresh_provider(rec))[0])
    return {"select": stats(select), "fit": stats(fit),
            "candidates_limit_1000": stats(limited),
            "apply_claim_release_us": 1e6 * statistics.median(applies),
            "refresh_provider_us": 1e6 * statistics.median(refreshes)}


# ---------------------------------------------------------------- baseline
def bench_baseline(fleet: ColumnarFleet, index: CapacityIndex, args) -> dict:
    t, providers = timed(lambda: reference.from_columnar(fleet))
    ref = reference.Reference(providers)
    multipliers = dict(Weigher().multipliers)
    samples, agree = [], True
    requests = flavor_requests()
    count = max(len(requests), args.baseline_requests)
    for i in range(count):
        r = requests[i % len(requests)]
        dt, top = timed(lambda: ref.select(r, multipliers, args.k))
        samples.append(dt)
        mine = [(c.root, round(c.weight, 9)) for c in index.select(r, weigher=Weigher(), k=args.k)]
        agree &= mine == [(u, round(w, 9)) for u, w in top]
    return {"select": stats(samples), "same_top_k": agree, "convert_s": t}


def bench_placement(fleet: ColumnarFleet, index: CapacityIndex, args) -> dict:
    from scheduler_ext.placement.http import HttpPlacement
    from scheduler_ext.lab.placement_server import LocalPlacement

    server = LocalPlacement()
    url = server.start()
    try:
        client = HttpPlacement.from_url(url, timeout=600)
        client.list_providers()  # the service has synced traits and classes
        db = os.path.join(server.directory or "", "placement.sqlite")
        load_s, _ = timed(lambda: load_placement_db(db, fleet))

        def get(request: CandidateRequest) -> dict:
            return client.allocation_candidates(request.to_query(), "1.36")

        # parity first: the unlimited answer for one flavor
        probe = flavor_requests()[1]
        same = _allocs(get(probe)) == _allocs(index.candidates(probe))
        samples = []
        for r in flavor_requests(limit=1000):
            for _ in range(args.placement_repeat):
                samples.append(timed(lambda: get(r))[0])
        return {"get_allocation_candidates": stats(samples), "load_db_s": load_s,
                "same_candidates_unlimited": same}
    finally:
        server.stop()


def bench_snapshot(fleet: ColumnarFleet, args) -> dict:
    """Reading the fleet for the engine from a real placement: over the API
    (four GETs per provider; timed on 100 providers and scaled up), from its
    database (SqlSnapshot), and the engine's refresh with nothing changed
    and with 100 providers changed (a one-VCPU claim each), against one GET
    /allocation_candidates."""
    from scheduler_ext.sources.fleet_view import FleetView
    from scheduler_ext.driver import make_conf
    from scheduler_ext.placement.client import read_provider
    from scheduler_ext.placement.http import HttpPlacement
    from scheduler_ext.lab.placement_server import LocalPlacement

    server = LocalPlacement()
    url = server.start()
    try:
        client = HttpPlacement.from_url(url, timeout=600)
        client.list_providers()
        db = os.path.join(server.directory or "", "placement.sqlite")
        load_placement_db(db, fleet)
        n = len(fleet)
        list_s, provs = timed(client.list_providers)
        sample = provs[:100]
        per_s, _ = timed(lambda: [read_provider(client, p.uuid) for p in sample])
        api_s = list_s + per_s / len(sample) * n
        conf = make_conf(snapshot_source="sql",
                         placement_database_connection=f"sqlite:///{db}")
        initial_s, view = timed(lambda: FleetView(client, conf))
        same = [timed(view.refresh)[0] for _ in range(3)]
        # 100 providers changed as other schedulers change them: a claim
        # each (the refresh reads what was written, not the fleet)
        for k, p in enumerate(sample[:100]):
            try:
                client.put_allocations(str(uuidlib.UUID(int=k + 1, version=4)),
                                       AllocationWrite({p.uuid: {"VCPU": 1}}, "b", "b", None))
            except errors.Conflict:
                continue
        changed_s, _ = timed(view.refresh)
        probe = flavor_requests(limit=1000)[1].to_query()
        ac_s = min(timed(lambda: client.allocation_candidates(probe))[0]
                   for _ in range(2))
        return {"api_snapshot_s_estimated": api_s, "api_list_providers_s": list_s,
                "sql_initial_load_and_index_s": initial_s,
                "sql_refresh_no_change_s": statistics.median(same),
                "sql_refresh_100_changed_s": changed_s,
                "get_allocation_candidates_s": ac_s}
    finally:
        server.stop()




# ------------------------------------------------------------------ nested
def bench_nested_engine(index: CapacityIndex, args) -> dict:
    """``select``/``fit`` on a nested fleet (``nested_bench``): the bench
    flavors with a QoS port's bandwidth group, and with a vGPU group."""
    weigher = Weigher()
    out: dict[str, Any] = {}
    for name, requests in (("port", port_requests()), ("vgpu", port_requests(vgpu=True))):
        select, fit = time_select_and_fit(index, requests, weigher, args)
        out[name] = {"select": stats(select), "fit": stats(fit)}
    limited = [timed(lambda: index.candidates(r))[0]
               for r in port_requests(limit=1000) for _ in range(max(1, args.repeat // 10))]
    out["candidates_limit_1000"] = stats(limited)
    return out


def bench_nested_baseline(fleet: ColumnarFleet, index: CapacityIndex, args) -> dict:
    """The plain-Python reading of placement's steps (``lab.reference``) on
    the same nested fleet: time per request and whether it finds the same
    roots as the engine."""
    t, providers = timed(lambda: reference.from_columnar(fleet))
    ref = reference.Reference(providers)
    samples, same = [], True
    requests = port_requests()
    for i in range(max(len(requests), args.baseline_requests)):
        r = requests[i % len(requests)]
        dt, roots = timed(lambda: ref.fitting_roots(r))
        samples.append(dt)
        same &= sorted(roots) == sorted(index.fit(r).uuids())
    return {"fitting_roots": stats(samples), "same_roots": same, "convert_s": t}


def bench_nested_placement(fleet: ColumnarFleet, index: CapacityIndex, args) -> dict:
    """A real placement holding the same nested fleet (database filled
    directly): ``GET /allocation_candidates`` as nova asks it (microversion
    1.36, ``limit=1000``) for the port requests, after checking that its
    unlimited answer for one of them equals the engine's."""
    from scheduler_ext.lab.nested import NESTED_TRAITS
    from scheduler_ext.lab.placement_server import LocalPlacement
    from scheduler_ext.placement.http import HttpPlacement

    server = LocalPlacement()
    url = server.start()
    try:
        client = HttpPlacement.from_url(url, timeout=1200)
        for trait in NESTED_TRAITS:
            client.create_trait(trait)
        db = os.path.join(server.directory or "", "placement.sqlite")
        load_s, _ = timed(lambda: load_placement_db(db, fleet))

        def get(request: CandidateRequest, version: str = "1.36") -> dict:
            return client.allocation_candidates(request.to_query(), version)

        probe = port_requests()[1]
        same = _areqs(get(probe, "1.39")) == _areqs(index.candidates(probe))
        samples = [timed(lambda: get(r))[0] for r in port_requests(limit=1000)
                   for _ in range(args.placement_repeat)]
        return {"get_allocation_candidates": stats(samples), "load_db_s": load_s,
                "same_candidates_unlimited": same}
    finally:
        server.stop()


def _areqs(answer: dict) -> set:
    """Allocation requests with their mappings, comparable as a set."""
    return {(frozenset((rp, rc, n) for rp, v in a["allocations"].items()
                       for rc, n in v["resources"].items()),
             frozenset((k, frozenset(v)) for k, v in a.get("mappings", {}).items()))
            for a in answer["allocation_requests"]}
