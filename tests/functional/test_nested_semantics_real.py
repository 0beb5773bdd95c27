"""Placement 16.0.0's rules on trees and granular groups, probed on a real
placement (``docs/placement-nested-semantics.rst``): its answers to
microversion-dependent queries, 400 included, against
``CandidateRequest.from_query`` and the engine; and the three defects the
engine does not copy, pinned so that a placement that fixes them fails
here (and the notes get updated)."""

from __future__ import annotations

import uuid
from urllib.parse import parse_qsl

import pytest

from scheduler_ext import errors
from scheduler_ext.engine import CapacityIndex
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.placement.query import CandidateRequest

SHARING = "MISC_SHARES_VIA_AGGREGATE"


class Fleet:
    """Named providers in the session's real placement."""

    def __init__(self, client):
        self.c = client
        self.u: dict[str, str] = {}
        self.agg = str(uuid.uuid4())

    def add(self, name, invs=None, traits=(), aggs=(), parent=None):
        p = self.c.create_provider(f"sem-{name}-{uuid.uuid4()}", uuid=str(uuid.uuid4()),
                                   parent_provider_uuid=self.u.get(parent))
        gen = p.generation
        if invs:
            gen = self.c.set_inventories(p.uuid, gen, {k: Inventory(v) for k, v in invs.items()})
        if traits:
            gen = self.c.set_traits(p.uuid, gen, traits)
        if aggs:
            self.c.set_aggregates(p.uuid, gen, aggs)
        self.u[name] = p.uuid

    def index(self):
        return CapacityIndex.from_snapshot(self.c.snapshot())

    def mine(self, answer, mappings=True):
        """Candidates by provider name (and mappings: placement 1.34+)."""
        back = {v: k for k, v in self.u.items()}
        out = []
        for a in answer["allocation_requests"]:
            if set(a["allocations"]) <= set(back):
                out.append((sorted((back[rp], rc, n) for rp, r in a["allocations"].items()
                                   for rc, n in r["resources"].items()),
                            sorted((k, sorted(back[x] for x in v))
                                   for k, v in a["mappings"].items()) if mappings else []))
        return sorted(out)


@pytest.fixture
def fleet(real_client):
    """``real_client`` holds nothing else and is emptied afterwards."""
    return Fleet(real_client)


@pytest.fixture(scope="module")
def gpu(private_placement_url):
    """One ``gpu_fleet`` for the read-only tests (the private placement is
    emptied first; the next ``real_client`` empties it again)."""
    client = HttpPlacement.from_url(private_placement_url)
    for prov in sorted(client.list_providers(), key=lambda p: p.parent_provider_uuid is None):
        for consumer in client.get_provider_allocations(prov.uuid):
            client.delete_allocations(consumer)
        client.delete_provider(prov.uuid)
    f = Fleet(client)
    gpu_fleet(f)
    return f


def get(client, query: str, version: str = "1.39"):
    return client._adapter.get("/allocation_candidates?" + query,
                               microversion=version, raise_exc=False)


def gpu_fleet(f):
    f.c.create_trait("CUSTOM_GPU_A")
    f.add("cn", {"VCPU": 16, "MEMORY_MB": 4096})
    f.add("numa", {"VCPU": 8}, parent="cn")
    f.add("gpu", {"VGPU": 4}, ["CUSTOM_GPU_A"], parent="cn")


@pytest.mark.parametrize("query,version", [
    ("resources=VCPU:1&required=in:CUSTOM_GPU_A,HW_CPU_X86_AVX2", "1.38"),
    ("resources1=VGPU:1", "1.24"),
    ("resources_G=VGPU:1", "1.32"),
    ("resources1=VGPU:1&same_subtree=1", "1.35"),
    ("resources1=VGPU:1&required2=CUSTOM_GPU_A", "1.36"),
    ("resources1=VGPU:1&resources2=VCPU:1", "1.39"),
    ("resources1=VGPU:1&same_subtree=1,2", "1.39"),
    ("resources=VCPU:1&required=CUSTOM_NEVER_CREATED", "1.39"),
    ("resources=VCPU:1&required=!CUSTOM_NEVER_CREATED", "1.39"),
    ("resources=CUSTOM_NO_SUCH_CLASS:1", "1.39"),
    ("resources=VCPU:1&root_required=CUSTOM_NEVER_CREATED", "1.39"),
    ("resources=VCPU:1&in_tree=not-a-uuid", "1.39"),
])
def test_placements_400s_are_ours(gpu, query, version):
    assert get(gpu.c, query, version).status_code == 400, query
    index = gpu.index()
    with pytest.raises(errors.InvalidRequest):
        index.candidates(CandidateRequest.from_query(parse_qsl(query), microversion=version))


@pytest.mark.parametrize("query,version", [
    ("resources=VCPU:1&required=in:CUSTOM_GPU_A,HW_CPU_X86_AVX2&resources1=VGPU:1"
     "&group_policy=none", "1.39"),
    # below 1.39 only the last required counts (the first would exclude all)
    ("resources=VGPU:1&required=HW_CPU_X86_AVX2&required=CUSTOM_GPU_A", "1.38"),
    ("resources_G=VGPU:1&resources=VCPU:1", "1.33"),
    ("resources1=VGPU:2&resources2=VCPU:2&group_policy=isolate"
     "&same_subtree=1,2", "1.36"),
    ("resources1=VGPU:1&required2=CUSTOM_GPU_A&same_subtree=1,2&group_policy=none", "1.36"),
    ("resources=VCPU:1&in_tree=00000000-0000-4000-8000-000000000000", "1.39"),
])
def test_accepted_queries_match(gpu, query, version):
    resp = get(gpu.c, query, version)
    assert resp.status_code == 200, resp.text
    mine = CandidateRequest.from_query(parse_qsl(query), microversion=version)
    mappings = int(version.split(".")[1]) >= 34
    assert gpu.mine(gpu.index().candidates(mine), mappings) == \
        gpu.mine(resp.json(), mappings)


def test_defect_merged_amounts_accumulate(fleet):
    """Placement 16.0.0 adds a granular group's VCPU into the unnumbered
    group's shared object under group_policy=isolate: a candidate pairs
    the numa child's 3 VCPU with 9 + 3 on the root. The engine: 9."""
    gpu_fleet(fleet)
    query = "resources=VCPU:9&resources3=VCPU:3&group_policy=isolate"
    real = fleet.mine(get(fleet.c, query).json())
    assert ([("cn", "VCPU", 12), ("numa", "VCPU", 3)],
            [("", ["cn"]), ("3", ["numa"])]) in real
    ours = fleet.mine(fleet.index().candidates(CandidateRequest.from_query(parse_qsl(query))))
    assert ours == [([("cn", "VCPU", 9), ("numa", "VCPU", 3)],
                     [("", ["cn"]), ("3", ["numa"])]),
                    ([("cn", "VCPU", 12)], [("", ["cn"]), ("3", ["cn"])])]


def test_defect_one_anchor_for_a_sharing_only_unnumbered_group(fleet):
    """Disk from shared storage only, a granular VCPU group: placement
    pairs the disk with one compute node of two; the engine with both."""
    for name in ("cn1", "cn2"):
        fleet.add(name, {"VCPU": 4}, aggs=[fleet.agg])
    fleet.add("ss", {"DISK_GB": 100}, [SHARING], aggs=[fleet.agg])
    query = "resources=DISK_GB:10&resources1=VCPU:1"
    real = fleet.mine(get(fleet.c, query).json())
    ours = fleet.mine(fleet.index().candidates(CandidateRequest.from_query(parse_qsl(query))))
    assert len(ours) == 2 and len(real) == 1 and real[0] in ours


def test_defect_sharing_provider_inside_a_tree_can_fail_with_500(fleet):
    """A sharing provider that is a child of a tree which cannot be a
    candidate, serving another tree: placement answers 500 (KeyError on a
    provider summary it never built); the engine answers."""
    fleet.add("tree_root", {"MEMORY_MB": 1024}, aggs=[fleet.agg])
    fleet.add("ss_child", {"DISK_GB": 100}, [SHARING], aggs=[fleet.agg], parent="tree_root")
    fleet.add("cn", {"VCPU": 4}, aggs=[fleet.agg])
    query = "resources=VCPU:1,DISK_GB:10"
    assert get(fleet.c, query).status_code == 500
    ours = fleet.mine(fleet.index().candidates(CandidateRequest.from_query(parse_qsl(query))))
    assert ours == [([("cn", "VCPU", 1), ("ss_child", "DISK_GB", 10)],
                     [("", ["cn", "ss_child"])])]


def test_released_child_allocations_match_a_real_delete(fleet):
    """A server's vGPU on a child: the engine's answer with ``released=``
    equals placement's after the allocations are deleted."""
    gpu_fleet(fleet)
    server = str(uuid.uuid4())
    fleet.c.put_allocations(server, AllocationWrite(
        {fleet.u["cn"]: {"VCPU": 16}, fleet.u["gpu"]: {"VGPU": 4}}, "p", "u", None))
    index = fleet.index()
    request = CandidateRequest.from_query(parse_qsl(
        "resources=VCPU:2&resources1=VGPU:1&required1=CUSTOM_GPU_A"))
    assert fleet.mine(index.candidates(request)) == fleet.mine(
        get(fleet.c, "&".join(f"{k}={v}" for k, v in request.to_query())).json()) == []
    released = fleet.c.get_consumer(server).allocations
    fleet.c.delete_allocations(server)
    real = get(fleet.c, "&".join(f"{k}={v}" for k, v in request.to_query())).json()
    assert fleet.mine(index.candidates(request, released)) == fleet.mine(real) != []
    assert index.fit(request, released).uuids() == [fleet.u["cn"]]


def test_granular_member_of_is_the_providers_own(fleet):
    """The root's aggregate spans its tree for the unnumbered group, not for
    a granular group: there the provider itself must be in it."""
    fleet.add("cn", {"VCPU": 4}, aggs=[fleet.agg])
    fleet.add("gpu", {"VGPU": 1}, parent="cn")
    index = fleet.index()
    for query, count in ((f"resources=VGPU:1&member_of={fleet.agg}", 1),
                         (f"resources1=VGPU:1&member_of1={fleet.agg}", 0)):
        real = fleet.mine(get(fleet.c, query).json())
        ours = fleet.mine(index.candidates(CandidateRequest.from_query(parse_qsl(query))))
        assert len(real) == count and ours == real, query


def test_resourceless_groups(fleet):
    """A resourceless group ignores its in_tree, and finds nothing without
    required traits or member_of (so the whole answer is empty)."""
    gpu_fleet(fleet)
    fleet.add("other", {"VCPU": 1})
    other = fleet.u["other"]
    cases = (
        (f"resources1=VGPU:1&required2=CUSTOM_GPU_A&in_tree2={other}"
         "&same_subtree=1,2&group_policy=none", 1),
        ("resources1=VGPU:1&required2=!CUSTOM_GPU_A&same_subtree=1,2"
         "&group_policy=none", 0),
    )
    index = fleet.index()
    for query, count in cases:
        real = fleet.mine(get(fleet.c, query).json())
        ours = fleet.mine(index.candidates(CandidateRequest.from_query(parse_qsl(query))))
        assert len(real) == count and ours == real, query
