"""The engine against a real placement 16.0.0 on random nested fleets.

Each case builds one seeded random nested fleet (``lab.nested``: compute
node trees one to three levels deep with NUMA, NIC-agent/NIC and pGPU
children, flat compute nodes, sharing providers; reserved, fractional
ratios, min/max/step, usage near capacity) in a private placement --
straight into its database, the "moving server" through the API -- indexes
it through the SQL snapshot source, and compares ``CapacityIndex.candidates``
with ``GET /allocation_candidates`` at microversion 1.39 for random queries
(unnumbered and granular groups, ``group_policy``, ``same_subtree``,
traits, aggregates, ``in_tree``, ``root_required``): the same set of
allocation requests (allocations and mappings) and the same provider
summaries. Then the moving server's allocations are deleted in placement
and every query is compared again with ``released=`` them on the index
built before the delete.

Two query shapes meet defects of placement 16.0.0
(``docs/placement-nested-semantics.rst``) and are not compared exactly:
a class asked by two groups without ``group_policy=none`` (merged amounts
accumulate: counted), and granular groups with an unnumbered group placed
on sharing providers only (placement keeps one arbitrary anchor: its answer
must be a subset of the engine's). Everything else must be equal.

Size: ``SCHEDULER_EXT_NESTED_FLEETS`` (default 12, what the test command
runs) fleets of ``SCHEDULER_EXT_NESTED_QUERIES`` (default 22) queries,
each compared before and after the release. ``benchmarks/parity_sweep.sh``
runs 50 fleets (50 x 22 x 2 = 2,200 comparisons, the parity claim of the
README). For a bigger sweep::

    SCHEDULER_EXT_NESTED_FLEETS=400 SCHEDULER_EXT_NESTED_QUERIES=40 \\
        .venv/bin/python -m pytest tests/functional/test_nested_parity.py
"""

from __future__ import annotations

import collections
import os
import random
from urllib.parse import urlencode

import pytest

from scheduler_ext.engine import CapacityIndex
from scheduler_ext.lab import nested, synthetic
from scheduler_ext.lab.nested_requests import random_nested_requests
from scheduler_ext.lab.placement_db import delete_providers, load_placement_db
from scheduler_ext.lab.placement_server import LocalPlacement
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.placement.model import SHARING_TRAIT
from scheduler_ext.placement.sql_snapshot import SqlSnapshot

FLEETS = int(os.environ.get("SCHEDULER_EXT_NESTED_FLEETS", "12"))
QUERIES = int(os.environ.get("SCHEDULER_EXT_NESTED_QUERIES", "22"))
TALLY: collections.Counter = collections.Counter()


@pytest.fixture(scope="module")
def nested_placement():
    """A private placement: (client, database URL)."""
    server = LocalPlacement()
    url = server.start()
    client = HttpPlacement.from_url(url)
    for trait in synthetic.CUSTOM_TRAITS + nested.NESTED_TRAITS:
        client.create_trait(trait)
    yield client, "sqlite:///" + os.path.join(server.directory or "", "placement.sqlite")
    server.stop()


def as_set(answer: dict) -> set:
    return {(frozenset((rp, rc, n) for rp, v in a["allocations"].items()
                       for rc, n in v["resources"].items()),
             frozenset((k, frozenset(v)) for k, v in a.get("mappings", {}).items()))
            for a in answer["allocation_requests"]}


def placement_answer(client, request, version="1.39") -> dict:
    url = "/allocation_candidates?" + urlencode(request.to_query())
    resp = client._adapter.get(url, microversion=version, raise_exc=False)
    assert resp.status_code == 200, f"{url}: {resp.status_code} {resp.text}"
    return resp.json()


def placement_defect(request, engine: dict) -> str | None:
    """Which known placement defect the query may meet (module docstring)."""
    seen: set[str] = set()
    for group in request.groups:
        if set(group.resources) & seen and request.group_policy != "none":
            return "accumulating"
        seen |= set(group.resources)
    if request.granular and request.resources:
        for a in engine["allocation_requests"]:
            if all(SHARING_TRAIT in engine["provider_summaries"][u]["traits"]
                   for u in a["mappings"].get("", [])):
                return "one_anchor"
    return None


def compare(client, index, request, released, context):
    engine = index.candidates(request, released)
    real = placement_answer(client, request)
    got, want = as_set(engine), as_set(real)
    defect = placement_defect(request, engine)
    TALLY["comparisons"] += 1
    TALLY["nonempty"] += bool(want)
    if defect == "one_anchor":
        TALLY[defect] += 1
        assert want <= got, context
        return
    if defect:
        TALLY[defect] += 1
        TALLY[defect + "_equal"] += got == want
        return
    TALLY["exact"] += 1
    TALLY["exact_granular"] += bool(request.granular)
    assert got == want, (f"{context}\nonly engine: {sorted(got - want, key=str)[:3]}"
                         f"\nonly placement: {sorted(want - got, key=str)[:3]}")
    sums = {u: {**s, "traits": sorted(s["traits"])}
            for u, s in real["provider_summaries"].items()}
    assert engine["provider_summaries"] == sums, context


@pytest.mark.parametrize("seed", range(FLEETS))
def test_nested_fleet_matches_placement(nested_placement, seed):
    client, db = nested_placement
    spec = nested.random_nested_fleet(7000 + seed, tag=f"P{seed}")
    client.create_resource_class(spec.custom_rc)
    load_placement_db(db, nested.spec_columnar(spec, without=[spec.mover or ""]))
    if spec.mover:
        client.put_allocations(spec.mover, AllocationWrite(
            spec.consumers[spec.mover], "p", "u", None))
    try:
        index = CapacityIndex.from_snapshot(SqlSnapshot(db).snapshot(spec.uuids))
        index.set_known_names(synthetic.CUSTOM_TRAITS + nested.NESTED_TRAITS,
                              [spec.custom_rc])
        requests = random_nested_requests(spec, random.Random(seed), QUERIES)
        for request in requests:
            compare(client, index, request, None, f"seed {seed}: {request.to_query()}")
        if spec.mover:
            released = spec.consumers[spec.mover]
            client.delete_allocations(spec.mover)
            for request in requests:
                compare(client, index, request, released,
                        f"seed {seed}, released: {request.to_query()}")
    finally:
        delete_providers(db, [p.uuid for p in spec.providers])


def test_the_run_compared_enough():
    """Per fleet: over 40 comparisons, most of them exact, more than 10
    with granular groups, more than 10 non-empty (at 50 fleets: the 2,000
    comparisons the parity claim rests on)."""
    assert TALLY["comparisons"] >= 40 * FLEETS, TALLY
    assert TALLY["exact"] >= 0.7 * TALLY["comparisons"], TALLY
    assert TALLY["exact_granular"] >= 10 * FLEETS, TALLY
    assert TALLY["nonempty"] >= 10 * FLEETS, TALLY
    print(dict(TALLY))
