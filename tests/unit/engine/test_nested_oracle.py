"""The engine on provider trees and granular groups against the plain-Python
reading of placement's steps (``lab.reference``), on seeded random nested
fleets; the tree path against the flat path on flat fleets; an index kept
fresh incrementally against one rebuilt from scratch."""

import random
import uuid

import pytest

from scheduler_ext.engine import CapacityIndex
from scheduler_ext.engine.tree import query as tree_query
from scheduler_ext.lab import nested, reference, synthetic
from scheduler_ext.lab.nested_requests import random_nested_requests
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement


def as_set(answer):
    """Allocation requests as comparable values: allocations and mappings."""
    return {(frozenset((rp, rc, n) for rp, v in a["allocations"].items()
                       for rc, n in v["resources"].items()),
             frozenset((k, frozenset(v)) for k, v in a["mappings"].items()))
            for a in answer["allocation_requests"]}


def build(seed, **kwargs):
    spec = nested.random_nested_fleet(seed, **kwargs)
    p = EmbeddedPlacement()
    synthetic.load(p, spec)
    return spec, p


def check(index, ref, request, released):
    got = index.candidates(request, released)
    want = ref.candidates(request, released)
    assert as_set(got) == as_set(want), (request.to_query(), released)
    assert len(got["allocation_requests"]) == len(as_set(got))  # de-duplicated
    assert got["provider_summaries"] == want["provider_summaries"], request.to_query()
    fit = index.fit(request, released, include_sharing_roots=True)
    assert sorted(fit.uuids()) == sorted(
        ref.fitting_roots(request, released, include_sharing_roots=True)), \
        request.to_query()
    every = as_set(got)
    for i in range(len(fit)):
        assert as_set({"allocation_requests": [fit.allocation_request(i)]}) <= every
    return len(every)


@pytest.mark.parametrize("seed", range(40))
def test_engine_matches_reference_on_nested_fleets(seed):
    spec, p = build(seed, sharing_in_trees=seed % 4 == 0)
    snap = p.snapshot()
    index = CapacityIndex.from_snapshot(snap)
    ref = reference.Reference(reference.from_snapshot(snap))
    movers = [None] + ([spec.consumers[spec.mover]] if spec.mover else [])
    for request in random_nested_requests(spec, random.Random(seed), 12):
        for released in movers:
            check(index, ref, request, released)


def test_random_mix_is_not_mostly_empty():
    """The generator aims at trees: enough non-empty answers to mean
    something, granular ones among them."""
    counts = {"all": 0, "nonempty": 0, "granular": 0, "isolate": 0, "subtree": 0}
    for seed in range(20):
        spec, p = build(seed)
        index = CapacityIndex.from_snapshot(p.snapshot())
        for request in random_nested_requests(spec, random.Random(seed), 12):
            n = len(index.candidates(request)["allocation_requests"])
            counts["all"] += 1
            counts["nonempty"] += n > 0
            counts["granular"] += n > 0 and bool(request.granular)
            counts["isolate"] += n > 0 and request.isolate
            counts["subtree"] += n > 0 and bool(request.same_subtree)
    assert counts["nonempty"] >= 0.25 * counts["all"], counts
    assert counts["granular"] >= 40 and counts["isolate"] >= 3 and counts["subtree"] >= 5, counts


@pytest.mark.parametrize("seed", range(20))
def test_tree_path_agrees_with_flat_path_on_flat_fleets(seed):
    spec = synthetic.random_fleet(seed)
    p = EmbeddedPlacement()
    synthetic.load(p, spec)
    index = CapacityIndex.from_snapshot(p.snapshot())
    for request in synthetic.random_requests(spec, random.Random(seed), 12):
        flat = index.candidates(request)
        with index.lock:
            tree = tree_query.answer(index, request, None)
        assert as_set(tree) == as_set(flat), request.to_query()
        assert tree["provider_summaries"] == flat["provider_summaries"]
        flat_fit = index.fit(request, include_sharing_roots=True)
        with index.lock:
            tree_fit = tree_query.fit(index, request, {}, True)
        assert tree_fit.uuids() == flat_fit.uuids(), request.to_query()


def _random_change(p, spec, rng):
    """One write: a claim, a delete, an inventory, trait or aggregate
    change, a new child or a deleted leaf."""
    prov = rng.choice(sorted(p.list_providers(), key=lambda x: x.uuid))
    kind = rng.choice(["claim", "claim", "delete", "inventory", "traits",
                       "aggregates", "child", "remove"])
    gen, invs = p.get_inventories(prov.uuid)
    if kind == "claim" and invs:
        rc = rng.choice(sorted(invs))
        inv = invs[rc]
        amount = inv.step_size * max(1, -(-inv.min_unit // inv.step_size))
        try:
            p.put_allocations(str(uuid.uuid4()), AllocationWrite(
                {prov.uuid: {rc: amount}}, "p", "u", None))
        except Exception:
            pass
    elif kind == "delete" and spec.consumers:
        consumer = rng.choice(sorted(spec.consumers))
        if p.get_consumer(consumer).allocations:
            p.delete_allocations(consumer)
    elif kind == "inventory" and invs:
        rc = rng.choice(sorted(invs))
        invs[rc] = Inventory(invs[rc].total + rng.randint(1, 8), invs[rc].reserved)
        p.set_inventories(prov.uuid, gen, invs)
    elif kind == "traits":
        p.set_traits(prov.uuid, gen, set(p.get_traits(prov.uuid)[1])
                     ^ {rng.choice(nested.VGPU_TYPES)})
    elif kind == "aggregates":
        p.set_aggregates(prov.uuid, gen, rng.sample(spec.aggregates, 1))
    elif kind == "child":
        child = p.create_provider(f"new-{uuid.uuid4()}", parent_provider_uuid=prov.uuid)
        p.set_inventories(child.uuid, 0, {"VGPU": Inventory(4)})
    elif kind == "remove":
        leaves = [x for x in p.list_providers() if not any(
            y.parent_provider_uuid == x.uuid for y in p.list_providers())]
        leaf = rng.choice(leaves)
        if not p.get_provider_allocations(leaf.uuid):
            p.delete_provider(leaf.uuid)
    return prov.uuid


@pytest.mark.parametrize("seed", range(8))
def test_incremental_index_matches_rebuilt_on_trees(seed):
    spec, p = build(seed)
    index = CapacityIndex.from_snapshot(p.snapshot())
    rng = random.Random(seed)
    requests = random_nested_requests(spec, rng, 6)
    for _ in range(25):
        _random_change(p, spec, rng)
        index.sync(p.snapshot())
        fresh = CapacityIndex.from_snapshot(p.snapshot())
        for request in requests:
            assert as_set(index.candidates(request)) == as_set(fresh.candidates(request))
            assert sorted(index.fit(request).uuids()) == sorted(fresh.fit(request).uuids())


@pytest.mark.parametrize("seed", range(6))
def test_limit_keeps_a_subset_with_its_trees(seed):
    spec, p = build(seed)
    index = CapacityIndex.from_snapshot(p.snapshot())
    trees = index.trees()
    for request in random_nested_requests(spec, random.Random(seed), 10):
        full = index.candidates(request)
        for limit in (1, 3):
            for randomize in (False, True):
                part = index.candidates(request.replace(limit=limit, randomize=randomize),
                                        rng=seed)
                assert len(part["allocation_requests"]) == min(
                    limit, len(full["allocation_requests"]))
                assert as_set(part) <= as_set(full)
                used = {rp for a in part["allocation_requests"] for rp in a["allocations"]}
                roots = {trees.root_of[index.row_of[rp]] for rp in used}
                assert set(part["provider_summaries"]) == {
                    index.uuids[r] for r in range(trees.n) if trees.root_of[r] in roots}
