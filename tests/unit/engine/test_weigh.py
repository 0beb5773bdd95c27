"""Weighing the fitting roots: nova's normalization, spread/pack, uuid
tie-break, host_subset_size with a seeded RNG."""

import random
import uuid

import numpy as np
import pytest

from scheduler_ext.engine import CapacityIndex, Weigher, Weighing
from scheduler_ext.lab import reference
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.engine.index import uuid_keys
from scheduler_ext.engine.weigh import normalize, subset_first, top_k
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement


def hosts(spec):
    """spec: [(free_ram_mb, free_vcpus)] on hosts of 4096 MB / 16 VCPU."""
    p = EmbeddedPlacement()
    out = []
    for i, (ram, cpu) in enumerate(spec):
        rp = p.create_provider(f"h{i}", uuid=str(uuid.UUID(int=i + 1)))
        p.set_inventories(rp.uuid, 0, {"MEMORY_MB": Inventory(4096),
                                       "VCPU": Inventory(16)})
        used = {k: v for k, v in (("MEMORY_MB", 4096 - ram), ("VCPU", 16 - cpu)) if v}
        if used:
            p.put_allocations(str(uuid.uuid4()), AllocationWrite(
                {rp.uuid: used}, "p", "u", None))
        out.append(rp.uuid)
    return p, out, CapacityIndex.from_snapshot(p.snapshot())


def test_normalize_like_nova():
    assert normalize(np.array([2, 4, 6])).tolist() == [0.0, 0.5, 1.0]
    assert normalize(np.array([3, 3])).tolist() == [0.0, 0.0]
    assert normalize(np.array([])).tolist() == []


def test_spread_and_pack_by_ram():
    _, u, index = hosts([(1024, 8), (3072, 8), (2048, 8)])
    req = CandidateRequest({"MEMORY_MB": 512})
    spread = index.select(req, weigher=Weigher.nova(ram=1.0, cpu=0, disk=0), k=3)
    assert [c.root for c in spread] == [u[1], u[2], u[0]]
    assert [c.weight for c in spread] == [1.0, 0.5, 0.0]
    pack = index.select(req, weigher=Weigher.nova(ram=-1.0, cpu=0, disk=0), k=3)
    assert [c.root for c in pack] == [u[0], u[2], u[1]]


def test_multipliers_combine_ram_and_cpu():
    _, u, index = hosts([(4096, 1), (1024, 16), (2048, 8)])
    req = CandidateRequest({"VCPU": 1})
    best = index.select(req, weigher=Weigher.nova(ram=1.0, cpu=3.0, disk=0), k=1)
    assert best[0].root == u[1]
    best = index.select(req, weigher=Weigher.nova(ram=3.0, cpu=1.0, disk=0), k=1)
    assert best[0].root == u[0]


def test_ties_break_by_uuid():
    _, u, index = hosts([(2048, 8)] * 6)
    choices = index.select(CandidateRequest({"VCPU": 1}), weigher=Weigher(), k=4)
    assert [c.root for c in choices] == sorted(u)[:4]


def test_top_k_many_ties_picks_smallest_uuids():
    rng = np.random.default_rng(3)
    ids = [str(uuid.UUID(int=int(x))) for x in rng.integers(1, 2**62, 500)]
    hi, lo = uuid_keys(ids)
    w = np.zeros(500)
    w[[7, 9]] = 1.0
    order = top_k(w, hi, lo, 5)
    assert order[:2].tolist() == sorted([7, 9], key=lambda i: ids[i])
    rest = sorted((i for i in range(500) if i not in (7, 9)), key=lambda i: ids[i])[:3]
    assert order[2:].tolist() == rest


@pytest.mark.parametrize("seed", range(20))
def test_every_host_asked_for_comes_by_weight_then_uuid(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    ids = [str(uuid.UUID(int=int(x))) for x in rng.integers(1, 2**62, n)]
    hi, lo = uuid_keys(ids)
    w = rng.choice([0.0, -0.0, 0.5, 1.0, 2.5], n) if seed % 2 else rng.random(n)
    expected = sorted(range(n), key=lambda i: (-w[i], ids[i]))
    assert top_k(w, hi, lo, n + int(rng.integers(0, 3))).tolist() == expected
    rows = rng.permutation(n)       # the keys read through rows
    got = top_k(w, hi[rows], lo[rows], n, rows=np.argsort(rows))
    assert got.tolist() == expected


def test_uuid_keys_order_like_strings():
    ids = sorted(str(uuid.uuid4()) for _ in range(200))
    hi, lo = uuid_keys(ids)
    assert np.lexsort((lo, hi)).tolist() == list(range(200))
    upper = uuid_keys([ids[0].upper()])
    assert (upper[0][0], upper[1][0]) == (hi[0], lo[0])


def test_host_subset_size_draws_among_the_best():
    _, u, index = hosts([(1024, 8), (3072, 8), (2048, 8), (4000, 8)])
    req = CandidateRequest({"MEMORY_MB": 512})
    w = Weigher.nova(ram=1.0, cpu=0, disk=0)
    firsts = {index.select(req, weigher=w, k=1, host_subset_size=2, rng=s)[0].root
              for s in range(40)}
    assert firsts == {u[3], u[1]}  # the two best, never the others
    a = index.select(req, weigher=w, k=3, host_subset_size=3, rng=random.Random(5))
    b = index.select(req, weigher=w, k=3, host_subset_size=3, rng=5)
    assert a == b
    assert subset_first(np.arange(5), 1).tolist() == [0, 1, 2, 3, 4]


def test_choices_carry_claimable_allocations():
    p, u, index = hosts([(1024, 8), (3072, 8)])
    choice = index.select(CandidateRequest({"MEMORY_MB": 512, "VCPU": 2}),
                          weigher=Weigher(), k=1)[0]
    assert choice.allocation_request["allocations"] == {
        choice.root: {"resources": {"MEMORY_MB": 512, "VCPU": 2}}}
    p.put_allocations(str(uuid.uuid4()), AllocationWrite(
        {rp: v["resources"] for rp, v in choice.allocation_request["allocations"].items()},
        "p", "u", None))


@pytest.mark.parametrize("seed", range(5))
def test_weights_match_the_python_baseline(seed):
    rng = random.Random(seed)
    spec = [(rng.randint(512, 4096), rng.randint(1, 16)) for _ in range(30)]
    p, _, index = hosts(spec)
    req = CandidateRequest({"MEMORY_MB": 512, "VCPU": 1})
    mult = {"MEMORY_MB": 1.0, "VCPU": 0.5}
    engine = index.select(req, weigher=Weigher(mult), k=10)
    base = reference.Reference(reference.from_snapshot(p.snapshot())).select(req, mult, 10)
    assert [(c.root, round(c.weight, 12)) for c in engine] == \
        [(r, round(w, 12)) for r, w in base]


def test_weighing_refuses_a_host_subset_size_below_one():
    with pytest.raises(ValueError, match="host_subset_size=0"):
        Weighing(host_subset_size=0)
    assert Weighing() == Weighing(Weigher.nova(1.0, 1.0, 1.0), 1)
