"""The engine against an independent per-provider reading of placement's
rules (``lab.reference``), on seeded random fleets; and an index kept
fresh incrementally against one rebuilt from scratch."""

import random
import uuid

import numpy as np
import pytest

from scheduler_ext.engine import CapacityIndex
from scheduler_ext.lab import reference, synthetic
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement


def as_set(answer):
    return {frozenset((rp, rc, n) for rp, v in a["allocations"].items()
                      for rc, n in v["resources"].items())
            for a in answer["allocation_requests"]}


def build(seed):
    spec = synthetic.random_fleet(seed)
    p = EmbeddedPlacement()
    synthetic.load(p, spec)
    return spec, p


@pytest.mark.parametrize("seed", range(60))
def test_engine_matches_reference(seed):
    spec, p = build(seed)
    snap = p.snapshot()
    index = CapacityIndex.from_snapshot(snap)
    ref = reference.Reference(reference.from_snapshot(snap))
    movers = [None] + ([spec.consumers[spec.mover]] if spec.mover else [])
    for request in synthetic.random_requests(spec, random.Random(seed), 12):
        for released in movers:
            got = index.candidates(request, released)
            want = ref.candidates(request, released)
            assert as_set(got) == as_set(want), (request, released)
            assert len(got["allocation_requests"]) == len(as_set(got))  # de-duplicated
            assert got["provider_summaries"] == want["provider_summaries"]
            fit = index.fit(request, released, include_sharing_roots=True)
            assert sorted(fit.uuids()) == sorted(
                ref.fitting_roots(request, released, include_sharing_roots=True))
            every = as_set(got)
            for i in range(len(fit)):
                assert as_set({"allocation_requests": [fit.allocation_request(i)]}) <= every


@pytest.mark.parametrize("seed", range(10))
def test_limit_keeps_a_subset(seed):
    spec, p = build(seed)
    index = CapacityIndex.from_snapshot(p.snapshot())
    for request in synthetic.random_requests(spec, random.Random(seed), 8):
        full = index.candidates(request)
        for limit in (1, 2, 5):
            for randomize in (False, True):
                part = index.candidates(request.replace(limit=limit, randomize=randomize),
                                        rng=seed)
                assert len(part["allocation_requests"]) == min(
                    limit, len(full["allocation_requests"]))
                assert as_set(part) <= as_set(full)
                used = {rp for a in part["allocation_requests"] for rp in a["allocations"]}
                assert set(part["provider_summaries"]) == used


def _random_change(p, spec, rng, consumers):
    """One write to placement: a claim, a delete, an inventory, trait or
    aggregate change."""
    prov = rng.choice(spec.providers)
    kind = rng.choice(["claim", "claim", "delete", "inventory", "traits", "aggregates"])
    gen, invs = p.get_inventories(prov.uuid)
    if kind == "claim" and invs:
        rc = rng.choice(sorted(invs))
        inv = invs[rc]
        amount = inv.step_size * max(1, -(-inv.min_unit // inv.step_size))
        consumer = str(uuid.uuid4())
        try:
            p.put_allocations(consumer, AllocationWrite(
                {prov.uuid: {rc: amount}}, "p", "u", None))
            consumers.append(consumer)
        except Exception:
            pass
    elif kind == "delete" and consumers:
        p.delete_allocations(consumers.pop(rng.randrange(len(consumers))))
    elif kind == "inventory" and invs:
        rc = rng.choice(sorted(invs))
        old = invs[rc]
        invs[rc] = Inventory(old.total + rng.randint(0, 8), old.reserved, old.min_unit,
                             old.max_unit, old.step_size, rng.choice([1.0, 0.57, 2.0]))
        p.set_inventories(prov.uuid, gen, invs)
    elif kind == "traits":
        traits = set(rng.sample(synthetic.CUSTOM_TRAITS, rng.randint(0, 2)))
        if rng.random() < 0.3:
            traits.add(synthetic.SHARING)
        p.set_traits(prov.uuid, gen, traits)
    elif kind == "aggregates":
        p.set_aggregates(prov.uuid, gen, rng.sample(spec.aggregates,
                                                   rng.randint(0, len(spec.aggregates))))


@pytest.mark.parametrize("seed", range(12))
def test_incremental_updates_match_a_rebuild(seed):
    spec, p = build(seed)
    rng = random.Random(seed)
    index = CapacityIndex.from_snapshot(p.snapshot())
    consumers: list[str] = []
    requests = synthetic.random_requests(spec, random.Random(seed), 6) + [
        CandidateRequest({"DISK_GB": 1}), CandidateRequest({"VCPU": 1, "DISK_GB": 1})]
    for step in range(40):
        _random_change(p, spec, rng, consumers)
        if step % 3 == 0:
            written = sum(index.refresh_provider(r) for r in p.snapshot().providers)
            assert written <= 1  # only the changed provider is rewritten
            fresh = CapacityIndex.from_snapshot(p.snapshot())
            for request in requests:
                assert as_set(index.candidates(request)) == as_set(fresh.candidates(request))
                assert index.candidates(request)["provider_summaries"] == \
                    fresh.candidates(request)["provider_summaries"]
        else:
            index.sync(p.snapshot())


@pytest.mark.parametrize("seed", range(20))
def test_enumeration_fallback_matches_the_vectorized_solver(seed, monkeypatch):
    from scheduler_ext.engine import flat

    spec, p = build(seed)
    index = CapacityIndex.from_snapshot(p.snapshot())
    requests = synthetic.random_requests(spec, random.Random(seed), 10)
    fast = [index.fit(r, include_sharing_roots=True) for r in requests]
    monkeypatch.setattr(flat, "MAX_COMBINATIONS", 0)
    for request, want in zip(requests, fast):
        got = index.fit(request, include_sharing_roots=True)
        assert got.uuids() == want.uuids()
        every = as_set(index.candidates(request))
        for i in range(len(got)):
            assert as_set({"allocation_requests": [got.allocation_request(i)]}) <= every


def test_empty_index():
    index = CapacityIndex.from_snapshot(EmbeddedPlacement().snapshot())
    request = CandidateRequest({"VCPU": 1})
    assert index.candidates(request) == {"allocation_requests": [],
                                         "provider_summaries": {}}
    assert len(index.fit(request)) == 0
    assert index.select(request, k=3) == []
    assert len(index) == 0


def test_limited_answer_is_the_head_of_the_full_one():
    from scheduler_ext.engine.flat import Enumerator

    index = CapacityIndex.from_columnar(synthetic.bench_fleet(3000, seed=4))
    request = CandidateRequest({"VCPU": 4, "MEMORY_MB": 8192, "DISK_GB": 80})
    full = index.candidates(request)["allocation_requests"]
    for limit in (1, 7, 100):
        assert index.candidates(request.replace(limit=limit))["allocation_requests"] == \
            full[:limit]
    ev = index.solver.evaluate(request)
    rows = list(Enumerator(index, index.solver, ev).roots_by_uuid(first=5))
    assert sorted(rows) == sorted(np.flatnonzero(ev.pre).tolist())
    assert [index.uuids[r] for r in rows] == sorted(index.uuids[r] for r in rows)
