"""The numpy engine against the real placement, on random fleets.

Each case builds one seeded random fleet (sharing providers, reserved,
fractional ratios, min/max/step, traits, aggregates, usage near capacity,
a custom class of its own) in the session's real placement through
HttpPlacement, indexes what placement then reports for those providers,
and compares ``CapacityIndex.candidates`` with ``GET /allocation_candidates``
at microversion 1.39 for unlimited queries: the same set of allocation
requests (allocations and mappings) and the same provider summaries.
Then the fleet's "moving server" consumer is deleted in placement and the
same queries are compared with ``released=`` its allocations on the index
built before the delete.

The placement database is shared by the whole session, so answers are
restricted to the fleet's own providers (its aggregates are fresh UUIDs, so
no candidate can mix them with another fleet's); the fleet is deleted
afterwards to keep placement's queries quick. Placement does not report a
candidate's anchor root, so (root, allocations) pairs are compared through
the allocations, which is what placement shows.
"""

from __future__ import annotations

import os
import random
from urllib.parse import urlencode

import pytest

from scheduler_ext.engine import CapacityIndex
from scheduler_ext.lab import synthetic
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.placement.model import FleetSnapshot, Provider, ProviderRecord

#: the test command runs 12 fleets; ``benchmarks/parity_sweep.sh`` runs 50
FLEETS = int(os.environ.get("SCHEDULER_EXT_PARITY_FLEETS", "12"))
QUERIES = 8


def placement_candidates(client, request: CandidateRequest) -> dict:
    url = "/allocation_candidates?" + urlencode(request.to_query())
    resp = client._adapter.get(url, microversion="1.39", raise_exc=False)
    assert resp.status_code == 200, f"{url}: {resp.status_code} {resp.text}"
    return resp.json()


def fleet_snapshot(client, spec: synthetic.FleetSpec) -> FleetSnapshot:
    """What placement reports for the fleet's providers (4 GETs each), and
    the custom traits and classes it knows (so that the engine gives
    placement's 400 for a name placement lacks, and answers otherwise)."""
    records = []
    for p in spec.providers:
        gen, invs = client.get_inventories(p.uuid)
        _, traits = client.get_traits(p.uuid)
        _, aggs = client.get_aggregates(p.uuid)
        usages = client.get_usages(p.uuid)
        records.append(ProviderRecord(Provider(p.uuid, p.name, gen, p.uuid),
                                      invs, usages, traits, aggs))
    get = client._adapter.get
    traits = get("/traits?name=startswith:CUSTOM_", microversion="1.6").json()["traits"]
    classes = get("/resource_classes", microversion="1.7").json()["resource_classes"]
    return FleetSnapshot(tuple(records), custom_traits=frozenset(traits),
                         custom_classes=frozenset(c["name"] for c in classes
                                                  if c["name"].startswith("CUSTOM_")))


def normalized(answer: dict, mine: set[str]) -> tuple[set, dict]:
    """(allocation requests as a set, summaries) restricted to ``mine``."""
    areqs = set()
    for a in answer["allocation_requests"]:
        rps = set(a["allocations"])
        assert rps <= mine or not rps & mine, f"candidate mixes fleets: {a}"
        if rps <= mine:
            areqs.add((
                frozenset((rp, rc, n) for rp, v in a["allocations"].items()
                          for rc, n in v["resources"].items()),
                frozenset((k, frozenset(v)) for k, v in a.get("mappings", {}).items())))
    sums = {u: {**s, "traits": sorted(s["traits"])}
            for u, s in answer["provider_summaries"].items() if u in mine}
    return areqs, sums


def cleanup(client, spec: synthetic.FleetSpec) -> None:
    for consumer in spec.consumers:
        if client.get_consumer(consumer).allocations:
            client.delete_allocations(consumer)
    for p in spec.providers:
        client.delete_provider(p.uuid)


def compare(client, index, request, mine, released=None, seed=None):
    engine = normalized(index.candidates(request, released), mine)
    real = normalized(placement_candidates(client, request), mine)
    context = f"seed {seed}, query {request.to_query()}, released {released}"
    assert engine[0] == real[0], (
        f"{context}\nonly engine: {sorted(engine[0] - real[0], key=str)[:4]}"
        f"\nonly placement: {sorted(real[0] - engine[0], key=str)[:4]}")
    assert engine[1] == real[1], context
    return len(real[0])


@pytest.mark.parametrize("seed", range(FLEETS))
def test_engine_matches_placement(real_placement, seed):
    client = real_placement
    spec = synthetic.random_fleet(1000 + seed, size=(5, 20), tag=f"P{seed}")
    synthetic.load(client, spec)
    try:
        index = CapacityIndex.from_snapshot(fleet_snapshot(client, spec))
        mine = spec.uuids
        rng = random.Random(seed)
        requests = synthetic.random_requests(spec, rng, QUERIES)
        # a query for everything the fleet's anchors can reach, always
        requests.append(CandidateRequest({"DISK_GB": 1}))
        for request in requests:
            compare(client, index, request, mine, seed=seed)
        if spec.mover:
            released = spec.consumers[spec.mover]
            client.delete_allocations(spec.mover)
            for request in requests:
                compare(client, index, request, mine, released, seed=seed)
    finally:
        cleanup(client, spec)


# ------------------------------------------------------------- corner fleet
def test_engine_matches_placement_corners(real_placement):
    client = real_placement
    spec, n = synthetic.probe_fleet("CORNER")
    synthetic.load(client, spec)
    try:
        index = CapacityIndex.from_snapshot(fleet_snapshot(client, spec))
        R = CandidateRequest
        flavor = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 10}
        T1, T2, T3 = synthetic.CUSTOM_TRAITS
        expected = [
            (R(flavor), 6),
            (R({"DISK_GB": 10}), 4),  # SS1, SS2, CN1, SS3
            (R(flavor, required=frozenset([T1])), 3),
            (R(flavor, forbidden=frozenset([T1])), 3),
            (R(flavor, member_of=(frozenset([n["B"]]),)), 0),
            (R(flavor, forbidden_aggregates=frozenset([n["C"]])), 3),
            (R(flavor, in_tree=n["CN2"]), 0),
            (R(flavor, in_tree=n["CN1"]), 1),
            (R({"DISK_GB": 10}, root_required=frozenset([T2])), 2),
            # SS3 is served through EMPTY (no inventory, trait T3) ...
            (R({"DISK_GB": 10}, root_required=frozenset([T3])), 1),
            # ... unless EMPTY, the anchor, is in a forbidden aggregate
            (R({"DISK_GB": 10}, root_required=frozenset([T3]),
               forbidden_aggregates=frozenset([n["F"]])), 0),
            (R({"VCPU": 57}, in_tree=n["ROUND"]), 0),
            (R({"VCPU": 56}, in_tree=n["ROUND"]), 1),
            (R({"MEMORY_MB": 64}, in_tree=n["UNITS"]), 0),
            (R({"MEMORY_MB": 200}, in_tree=n["UNITS"]), 0),
            (R({"MEMORY_MB": 832}, in_tree=n["UNITS"]), 0),
            (R({"MEMORY_MB": 768}, in_tree=n["UNITS"]), 1),
            (R({"VCPU": 1, "DISK_GB": 10}, required_any=(frozenset([T1, T3]),)), 3),
            (R(flavor, required=frozenset([T1, T2])), 1),
            (R(flavor, required_any=(frozenset([T1, T2]),)), 4),
            (R(flavor, forbidden=frozenset([T2])), 4),
            (R(flavor, member_of=(frozenset([n["A"]]), frozenset([n["B"], n["C"]]))), 1),
            (R({"DISK_GB": 10}, member_of=(frozenset([n["A"]]), frozenset([n["C"]]))), 1),
            (R(flavor, root_required=frozenset([T1])), 0),
            (R(flavor, root_forbidden=frozenset([T2])), 4),
            (R({"DISK_GB": 1}, in_tree=n["SS1"]), 1),
        ]
        for request, count in expected:
            got = compare(client, index, request, spec.uuids, seed="corner")
            assert got == count, (request.to_query(), got, count)
    finally:
        cleanup(client, spec)
