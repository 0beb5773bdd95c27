"""Sharing providers and filters, on placement-semantics.md's probe fleet.

CN1 (local disk, agg A), CN2 (aggs A, B, trait T2), CN3 (no aggregate),
CN4 (agg C), SS1 (sharing disk, aggs A, C, trait T1), SS2 (sharing disk,
agg A), plus ROUND/UNITS (no disk, no aggregate), SS3 (sharing disk, aggs
D, E) and EMPTY (no inventory, trait T3, aggs E, F).
"""

import random

import pytest

from scheduler_ext import errors
from scheduler_ext.engine import CapacityIndex
from scheduler_ext.lab import synthetic
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.placement import Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement

T1, T2, T3 = synthetic.CUSTOM_TRAITS
FLAVOR = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 10}


@pytest.fixture(scope="module")
def probe():
    spec, names = synthetic.probe_fleet("UNIT")
    p = EmbeddedPlacement()
    synthetic.load(p, spec)
    return CapacityIndex.from_snapshot(p.snapshot()), names


def shape(index, names, request):
    """Candidates as sorted 'CN1+SS1'-style strings (provider:classes)."""
    by_uuid = {u: k for k, u in names.items()}
    answer = index.candidates(request)
    out = sorted("+".join(sorted(
        f"{by_uuid[rp]}:{','.join(sorted(v['resources']))}"
        for rp, v in a["allocations"].items())) for a in answer["allocation_requests"])
    return out


def test_probe_gives_exactly_the_six_candidates(probe):
    index, n = probe
    assert shape(index, n, CandidateRequest(FLAVOR)) == [
        "CN1:DISK_GB,MEMORY_MB,VCPU",
        "CN1:MEMORY_MB,VCPU+SS1:DISK_GB",
        "CN1:MEMORY_MB,VCPU+SS2:DISK_GB",
        "CN2:MEMORY_MB,VCPU+SS1:DISK_GB",
        "CN2:MEMORY_MB,VCPU+SS2:DISK_GB",
        "CN4:MEMORY_MB,VCPU+SS1:DISK_GB",
    ]


def test_shared_class_only_gives_standalone_deduplicated(probe):
    index, n = probe
    # SS1/SS2 serve CN1, CN2, CN4 and each other, yet appear once each
    assert shape(index, n, CandidateRequest({"DISK_GB": 10})) == [
        "CN1:DISK_GB", "SS1:DISK_GB", "SS2:DISK_GB", "SS3:DISK_GB"]


def test_required_trait_met_collectively(probe):
    index, n = probe
    got = shape(index, n, CandidateRequest(FLAVOR, required=[T1]))
    assert got == ["CN1:MEMORY_MB,VCPU+SS1:DISK_GB", "CN2:MEMORY_MB,VCPU+SS1:DISK_GB",
                   "CN4:MEMORY_MB,VCPU+SS1:DISK_GB"]
    # T1 (SS1) and T2 (CN2) only together
    both = shape(index, n, CandidateRequest(FLAVOR, required=[T1, T2]))
    assert both == ["CN2:MEMORY_MB,VCPU+SS1:DISK_GB"]
    anyof = shape(index, n, CandidateRequest(FLAVOR, required_any=[(T1, T2)]))
    assert anyof == ["CN1:MEMORY_MB,VCPU+SS1:DISK_GB", "CN2:MEMORY_MB,VCPU+SS1:DISK_GB",
                     "CN2:MEMORY_MB,VCPU+SS2:DISK_GB", "CN4:MEMORY_MB,VCPU+SS1:DISK_GB"]


def test_forbidden_trait_applies_to_every_provider(probe):
    index, n = probe
    assert shape(index, n, CandidateRequest(FLAVOR, forbidden=[T1])) == [
        "CN1:DISK_GB,MEMORY_MB,VCPU", "CN1:MEMORY_MB,VCPU+SS2:DISK_GB",
        "CN2:MEMORY_MB,VCPU+SS2:DISK_GB"]
    assert shape(index, n, CandidateRequest(FLAVOR, forbidden=[T2])) == [
        "CN1:DISK_GB,MEMORY_MB,VCPU", "CN1:MEMORY_MB,VCPU+SS1:DISK_GB",
        "CN1:MEMORY_MB,VCPU+SS2:DISK_GB", "CN4:MEMORY_MB,VCPU+SS1:DISK_GB"]


def test_member_of_applies_to_the_sharing_provider_too(probe):
    index, n = probe
    # CN2 is in B but no sharing provider is: nothing
    assert shape(index, n, CandidateRequest(FLAVOR, member_of=[[n["B"]]])) == []
    assert shape(index, n, CandidateRequest(FLAVOR, member_of=[[n["A"]]])) == [
        "CN1:DISK_GB,MEMORY_MB,VCPU", "CN1:MEMORY_MB,VCPU+SS1:DISK_GB",
        "CN1:MEMORY_MB,VCPU+SS2:DISK_GB", "CN2:MEMORY_MB,VCPU+SS1:DISK_GB",
        "CN2:MEMORY_MB,VCPU+SS2:DISK_GB"]
    # AND of lists: in A and in (B or C), for the CN and the pool alike
    assert shape(index, n, CandidateRequest(
        FLAVOR, member_of=[[n["A"]], [n["B"], n["C"]]])) == [
        "CN2:MEMORY_MB,VCPU+SS1:DISK_GB"]
    assert shape(index, n, CandidateRequest(
        {"DISK_GB": 10}, member_of=[[n["A"]], [n["C"]]])) == ["SS1:DISK_GB"]


def test_forbidden_aggregate(probe):
    index, n = probe
    # !C removes CN4 and SS1
    assert shape(index, n, CandidateRequest(FLAVOR, forbidden_aggregates=[n["C"]])) == [
        "CN1:DISK_GB,MEMORY_MB,VCPU", "CN1:MEMORY_MB,VCPU+SS2:DISK_GB",
        "CN2:MEMORY_MB,VCPU+SS2:DISK_GB"]


def test_forbidden_aggregate_also_rules_out_the_anchor(probe):
    index, n = probe
    disk = {"DISK_GB": 10}
    # SS3 serves EMPTY (aggregate E), the only root with T3
    assert shape(index, n, CandidateRequest(disk, root_required=[T3])) == ["SS3:DISK_GB"]
    # EMPTY is also in F: forbidding F drops it as an anchor
    assert shape(index, n, CandidateRequest(
        disk, root_required=[T3], forbidden_aggregates=[n["F"]])) == []


def test_in_tree_turns_sharing_off(probe):
    index, n = probe
    assert shape(index, n, CandidateRequest(FLAVOR, in_tree=n["CN2"])) == []
    assert shape(index, n, CandidateRequest(FLAVOR, in_tree=n["CN1"])) == [
        "CN1:DISK_GB,MEMORY_MB,VCPU"]
    assert shape(index, n, CandidateRequest({"DISK_GB": 1}, in_tree=n["SS1"])) == [
        "SS1:DISK_GB"]
    unknown = "00000000-0000-4000-8000-000000000000"
    assert shape(index, n, CandidateRequest(FLAVOR, in_tree=unknown)) == []


def test_root_required_checks_the_anchor_only(probe):
    index, n = probe
    assert shape(index, n, CandidateRequest(FLAVOR, root_required=[T2])) == [
        "CN2:MEMORY_MB,VCPU+SS1:DISK_GB", "CN2:MEMORY_MB,VCPU+SS2:DISK_GB"]
    # T1 is SS1's: SS1 anchors nothing with VCPU, so no candidate
    assert shape(index, n, CandidateRequest(FLAVOR, root_required=[T1])) == []
    assert shape(index, n, CandidateRequest(FLAVOR, root_forbidden=[T2])) == [
        "CN1:DISK_GB,MEMORY_MB,VCPU", "CN1:MEMORY_MB,VCPU+SS1:DISK_GB",
        "CN1:MEMORY_MB,VCPU+SS2:DISK_GB", "CN4:MEMORY_MB,VCPU+SS1:DISK_GB"]


def test_provider_summaries(probe):
    index, n = probe
    answer = index.candidates(CandidateRequest(FLAVOR, required=[T1]))
    sums = answer["provider_summaries"]
    assert set(sums) == {n["CN1"], n["CN2"], n["CN4"], n["SS1"]}
    assert sums[n["CN1"]]["resources"] == {
        "VCPU": {"capacity": 8, "used": 0}, "MEMORY_MB": {"capacity": 4096, "used": 0},
        "DISK_GB": {"capacity": 100, "used": 0}}  # every class, not only used ones
    assert sums[n["SS1"]]["traits"] == sorted(["MISC_SHARES_VIA_AGGREGATE", T1])
    assert sums[n["CN2"]]["parent_provider_uuid"] is None
    assert sums[n["CN2"]]["root_provider_uuid"] == n["CN2"]
    for areq in answer["allocation_requests"]:
        assert areq["mappings"] == {"": sorted(areq["allocations"])}


def test_limit_cuts_requests_and_summaries(probe):
    index, n = probe
    full = index.candidates(CandidateRequest(FLAVOR))
    part = index.candidates(CandidateRequest(FLAVOR, limit=2))
    assert part["allocation_requests"] == full["allocation_requests"][:2]
    used = {rp for a in part["allocation_requests"] for rp in a["allocations"]}
    assert set(part["provider_summaries"]) == used
    # random sampling: reproducible with a seed, drawn from the full set
    r = CandidateRequest(FLAVOR, limit=3, randomize=True)
    a = index.candidates(r, rng=7)["allocation_requests"]
    assert a == index.candidates(r, rng=random.Random(7))["allocation_requests"]
    assert len(a) == 3 and all(x in full["allocation_requests"] for x in a)
    shuffled = index.candidates(CandidateRequest(FLAVOR, randomize=True), rng=1)
    assert sorted(map(str, shuffled["allocation_requests"])) == \
        sorted(map(str, full["allocation_requests"]))


def test_fast_path_roots_and_picks(probe):
    index, n = probe
    fit = index.fit(CandidateRequest(FLAVOR))
    assert sorted(fit.uuids()) == sorted([n["CN1"], n["CN2"], n["CN4"]])
    every = index.candidates(CandidateRequest(FLAVOR))["allocation_requests"]
    for i in range(len(fit)):
        assert fit.allocation_request(i) in every
    cn1 = fit.uuids().index(n["CN1"])
    # local first: CN1 takes its own disk
    assert list(fit.allocation_request(cn1)["allocations"]) == [n["CN1"]]
    # sharing providers are no hosts unless asked for
    disk = CandidateRequest({"DISK_GB": 10})
    assert n["SS1"] not in index.fit(disk).uuids()
    assert n["SS1"] in index.fit(disk, include_sharing_roots=True).uuids()


def test_fast_path_picks_the_sharing_provider_meeting_the_trait(probe):
    index, n = probe
    fit = index.fit(CandidateRequest(FLAVOR, required=[T1]))
    assert sorted(fit.uuids()) == sorted([n["CN1"], n["CN2"], n["CN4"]])
    for i in range(len(fit)):
        assert n["SS1"] in fit.allocation_request(i)["allocations"]


def test_fast_path_prefers_the_sharing_provider_with_most_free():
    p = EmbeddedPlacement()
    agg = "8592a199-7d73-4465-8df6-ab00a6243c82"
    cn = p.create_provider("cn")
    g = p.set_inventories(cn.uuid, 0, {"VCPU": Inventory(4)})
    p.set_aggregates(cn.uuid, g, [agg])
    pools = []
    for name, total in (("small", 100), ("big", 900), ("mid", 500)):
        s = p.create_provider(name)
        g = p.set_inventories(s.uuid, 0, {"DISK_GB": Inventory(total)})
        g = p.set_aggregates(s.uuid, g, [agg])
        p.set_traits(s.uuid, g, ["MISC_SHARES_VIA_AGGREGATE"])
        pools.append(s.uuid)
    index = CapacityIndex.from_snapshot(p.snapshot())
    fit = index.fit(CandidateRequest({"VCPU": 1, "DISK_GB": 10}))
    assert fit.uuids() == [cn.uuid]
    assert fit.allocation_request(0)["allocations"][pools[1]] == {
        "resources": {"DISK_GB": 10}}
    assert fit.free("DISK_GB").tolist() == [900]


def test_a_child_supplies_its_root():
    """Once Unsupported: a class held only by a child is supplied to the
    root's tree, the root is the candidate's anchor."""
    p = EmbeddedPlacement()
    root = p.create_provider("root")
    child = p.create_provider("child", parent_provider_uuid=root.uuid)
    p.set_inventories(child.uuid, 0, {"VCPU": Inventory(4)})
    index = CapacityIndex.from_snapshot(p.snapshot())
    answer = index.candidates(CandidateRequest({"VCPU": 1}))
    assert answer["allocation_requests"] == [{
        "allocations": {child.uuid: {"resources": {"VCPU": 1}}},
        "mappings": {"": [child.uuid]}}]
    assert set(answer["provider_summaries"]) == {root.uuid, child.uuid}
    fit = index.fit(CandidateRequest({"VCPU": 1}))
    assert fit.uuids() == [root.uuid]
    assert fit.allocation_request(0)["allocations"] == {
        child.uuid: {"resources": {"VCPU": 1}}}


def test_request_type_checked(probe):
    index, _ = probe
    with pytest.raises(errors.InvalidRequest):
        index.fit({"VCPU": 1})


def test_batched_picks_are_candidates_when_classes_come_from_two_sharing_providers():
    """Picks built in one batch: local hosts, hosts whose disk is shared,
    and hosts taking two classes from two different sharing providers
    (the class-by-class path) are each one of placement's candidates."""
    p = EmbeddedPlacement()
    agg = "8592a199-7d73-4465-8df6-ab00a6243c82"
    p.create_resource_class("CUSTOM_SCRATCH")
    sharing = {}
    for name, rc in (("ss-disk", "DISK_GB"), ("ss-scratch", "CUSTOM_SCRATCH")):
        rp = p.create_provider(name)
        g = p.set_inventories(rp.uuid, 0, {rc: Inventory(1000)})
        g = p.set_aggregates(rp.uuid, g, [agg])
        p.set_traits(rp.uuid, g, ["MISC_SHARES_VIA_AGGREGATE"])
        sharing[rc] = rp.uuid
    for i in range(6):
        rp = p.create_provider(f"cn{i}")
        invs = {"VCPU": Inventory(4), "MEMORY_MB": Inventory(4096)}
        if i % 2:
            invs["DISK_GB"] = Inventory(100)
        g = p.set_inventories(rp.uuid, 0, invs)
        p.set_aggregates(rp.uuid, g, [agg])
    index = CapacityIndex.from_snapshot(p.snapshot())
    for wanted in ({"VCPU": 1, "DISK_GB": 10},
                   {"VCPU": 1, "MEMORY_MB": 64, "DISK_GB": 10, "CUSTOM_SCRATCH": 5}):
        request = CandidateRequest(wanted)
        fit = index.fit(request)
        every = index.candidates(request)["allocation_requests"]
        picks = fit.allocation_requests(list(range(len(fit))))
        assert len(picks) == 6
        for pick in picks:
            assert pick in every
            assert pick["mappings"][""] == sorted(pick["allocations"])
        if "CUSTOM_SCRATCH" in wanted:
            assert all(sharing["CUSTOM_SCRATCH"] in pick["allocations"] for pick in picks)
