"""The engine on small hand-built provider trees: each rule of
``docs/placement-nested-semantics.rst`` pinned by a case that fails when
the rule is broken."""

import uuid

import numpy as np
import pytest

from scheduler_ext import errors
from scheduler_ext.engine import CapacityIndex
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest, RequestGroup

SHARING = "MISC_SHARES_VIA_AGGREGATE"
AGG, AGG2 = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))
BW = "NET_BW_EGR_KILOBIT_PER_SEC"


class Fleet:
    """An embedded placement with named providers."""

    def __init__(self):
        self.p = EmbeddedPlacement()
        self.u: dict[str, str] = {}
        for t in ("CUSTOM_A", "CUSTOM_B", "CUSTOM_PHYSNET0", "CUSTOM_AGENT"):
            self.p.create_trait(t)

    def add(self, name, invs=None, traits=(), aggs=(), parent=None):
        prov = self.p.create_provider(name, uuid=str(uuid.uuid4()),
                                      parent_provider_uuid=self.u.get(parent))
        gen = prov.generation
        if invs:
            gen = self.p.set_inventories(prov.uuid, gen, {
                rc: inv if isinstance(inv, Inventory) else Inventory(inv)
                for rc, inv in invs.items()})
        if traits:
            gen = self.p.set_traits(prov.uuid, gen, traits)
        if aggs:
            self.p.set_aggregates(prov.uuid, gen, aggs)
        self.u[name] = prov.uuid
        return prov.uuid

    def use(self, allocs):
        consumer = str(uuid.uuid4())
        self.p.put_allocations(consumer, AllocationWrite(
            {self.u[k]: v for k, v in allocs.items()}, "p", "u", None))
        return consumer

    def index(self):
        return CapacityIndex.from_snapshot(self.p.snapshot())

    def names(self, answer):
        """Candidates as {(name, rc, n)} and mappings by name."""
        back = {v: k for k, v in self.u.items()}
        return sorted(
            (sorted((back[rp], rc, n) for rp, r in a["allocations"].items()
                    for rc, n in r["resources"].items()),
             sorted((k, sorted(back[x] for x in v)) for k, v in a["mappings"].items()))
            for a in answer["allocation_requests"])


@pytest.fixture
def gpu_host():
    f = Fleet()
    f.add("cn", {"VCPU": 8, "MEMORY_MB": 4096}, ["HW_CPU_X86_AVX2"])
    f.add("gpu1", {"VGPU": 1}, ["CUSTOM_A"], parent="cn")
    f.add("gpu2", {"VGPU": 2}, ["CUSTOM_B"], parent="cn")
    return f


def R(resources=None, *groups, **kw):
    return CandidateRequest(resources or {}, granular=tuple(groups), **kw)


def test_a_vgpu_group_maps_the_child(gpu_host):
    f = gpu_host
    answer = f.index().candidates(R({"VCPU": 1}, RequestGroup("1", {"VGPU": 1})))
    assert f.names(answer) == [
        ([("cn", "VCPU", 1), ("gpu1", "VGPU", 1)], [("", ["cn"]), ("1", ["gpu1"])]),
        ([("cn", "VCPU", 1), ("gpu2", "VGPU", 1)], [("", ["cn"]), ("1", ["gpu2"])])]
    assert set(answer["provider_summaries"]) == {f.u["cn"], f.u["gpu1"], f.u["gpu2"]}
    assert answer["provider_summaries"][f.u["gpu1"]]["parent_provider_uuid"] == f.u["cn"]


def test_the_unnumbered_group_takes_classes_from_any_member(gpu_host):
    f = gpu_host
    answer = f.index().candidates(R({"VCPU": 1, "VGPU": 2}))
    assert f.names(answer) == [
        ([("cn", "VCPU", 1), ("gpu2", "VGPU", 2)], [("", ["cn", "gpu2"])])]


def test_required_traits_count_only_on_providers_used(gpu_host):
    f = gpu_host
    index = f.index()
    # the root's trait counts when the root supplies something...
    assert f.names(index.candidates(R({"VCPU": 1, "VGPU": 1},
                                      required=["HW_CPU_X86_AVX2", "CUSTOM_B"]))) == [
        ([("cn", "VCPU", 1), ("gpu2", "VGPU", 1)], [("", ["cn", "gpu2"])])]
    # ... and not when only a child does
    assert index.candidates(R({"VGPU": 1}, required=["HW_CPU_X86_AVX2"]))[
        "allocation_requests"] == []


def test_granular_traits_are_the_providers_own(gpu_host):
    f = gpu_host
    answer = f.index().candidates(R({"VCPU": 1}, RequestGroup(
        "1", {"VGPU": 1}, required=["CUSTOM_B"])))
    assert [m for _, m in f.names(answer)] == [[("", ["cn"]), ("1", ["gpu2"])]]


def test_isolate_and_none_with_two_groups(gpu_host):
    f = gpu_host
    index = f.index()
    g1, g2 = RequestGroup("1", {"VGPU": 1}), RequestGroup("2", {"VGPU": 1})
    iso = f.names(index.candidates(R({}, g1, g2, group_policy="isolate")))
    assert iso == [
        ([("gpu1", "VGPU", 1), ("gpu2", "VGPU", 1)], [("1", ["gpu1"]), ("2", ["gpu2"])]),
        ([("gpu1", "VGPU", 1), ("gpu2", "VGPU", 1)], [("1", ["gpu2"]), ("2", ["gpu1"])])]
    none = f.names(index.candidates(R({}, g1, g2, group_policy="none")))
    # gpu2 holds 2: both groups may land on it (amounts summed)
    assert ([("gpu2", "VGPU", 2)], [("1", ["gpu2"]), ("2", ["gpu2"])]) in none
    assert len(none) == 3
    fit = index.fit(R({}, g1, g2, group_policy="isolate"))
    assert fit.uuids() == [f.u["cn"]]
    req = fit.allocation_request(0)
    assert set(req["mappings"]["1"] + req["mappings"]["2"]) == {f.u["gpu1"], f.u["gpu2"]}


def test_merged_amounts_must_fit_capacity_and_max_unit():
    f = Fleet()
    f.add("cn", {"VCPU": Inventory(8, max_unit=4)})
    index = f.index()
    r = R({"VCPU": 2}, RequestGroup("1", {"VCPU": 2}), group_policy="none")
    assert f.names(index.candidates(r)) == [
        ([("cn", "VCPU", 4)], [("", ["cn"]), ("1", ["cn"])])]
    assert index.candidates(R({"VCPU": 3}, RequestGroup("1", {"VCPU": 2}),
                              group_policy="none"))["allocation_requests"] == []
    f.use({"cn": {"VCPU": 4}})
    f.use({"cn": {"VCPU": 1}})
    index = f.index()
    assert index.candidates(r)["allocation_requests"] == []
    assert len(index.fit(r)) == 0
    assert len(index.fit(R({"VCPU": 2}, RequestGroup("1", {"VCPU": 1}),
                           group_policy="none"))) == 1


@pytest.fixture
def nic_host():
    """cn -> agent (CUSTOM_AGENT) -> nic1, nic2 (bandwidth); cn -> agent2 ->
    nic3."""
    f = Fleet()
    f.add("cn", {"VCPU": 8})
    f.add("agent", {}, ["CUSTOM_AGENT"], parent="cn")
    f.add("nic1", {BW: 1000}, ["CUSTOM_PHYSNET0"], parent="agent")
    f.add("nic2", {BW: 1000}, [], parent="agent")
    f.add("agent2", {}, [], parent="cn")
    f.add("nic3", {BW: 1000}, ["CUSTOM_PHYSNET0"], parent="agent2")
    return f


def test_same_subtree_with_a_resourceless_group(nic_host):
    f = nic_host
    r = R({}, RequestGroup("1", {BW: 10}), RequestGroup("2", {}, required=["CUSTOM_AGENT"]),
          group_policy="none", same_subtree=[("1", "2")])
    answer = f.index().candidates(r)
    assert f.names(answer) == [
        ([("nic1", BW, 10)], [("1", ["nic1"]), ("2", ["agent"])]),
        ([("nic2", BW, 10)], [("1", ["nic2"]), ("2", ["agent"])])]
    # the resourceless group's provider adds no allocation
    fit = f.index().fit(r)
    assert len(fit) == 1
    req = fit.allocation_request(0)
    assert req["mappings"]["2"] == [f.u["agent"]]
    assert set(req["allocations"]) == set(req["mappings"]["1"])


def test_same_subtree_between_two_resourced_groups(nic_host):
    f = nic_host
    f.p.set_inventories(f.u["agent2"], 0, {"VCPU": Inventory(2)})
    r = R({}, RequestGroup("1", {BW: 10}, required=["CUSTOM_PHYSNET0"]),
          RequestGroup("2", {"VCPU": 1}), group_policy="none", same_subtree=[("1", "2")])
    # (nic1, agent2) is out: neither is above the other
    assert f.names(f.index().candidates(r)) == [
        ([("agent2", "VCPU", 1), ("nic3", BW, 10)], [("1", ["nic3"]), ("2", ["agent2"])]),
        ([("cn", "VCPU", 1), ("nic1", BW, 10)], [("1", ["nic1"]), ("2", ["cn"])]),
        ([("cn", "VCPU", 1), ("nic3", BW, 10)], [("1", ["nic3"]), ("2", ["cn"])])]


def test_resourceless_group_without_traits_or_aggregates_matches_nothing(nic_host):
    f = nic_host
    r = R({}, RequestGroup("1", {BW: 10}), RequestGroup("2", {}, forbidden=["CUSTOM_B"]),
          group_policy="none", same_subtree=[("1", "2")])
    assert f.index().candidates(r)["allocation_requests"] == []
    assert len(f.index().fit(r)) == 0


def test_granular_member_of_is_not_inherited_from_the_root():
    f = Fleet()
    f.add("cn", {"VCPU": 4}, aggs=[AGG])
    f.add("gpu", {"VGPU": 1}, parent="cn")
    index = f.index()
    # the unnumbered group: the root's aggregate spans the tree
    assert len(index.candidates(R({"VGPU": 1}, member_of=[[AGG]]))["allocation_requests"]) == 1
    # a granular group: the provider itself must be in the aggregate
    assert index.candidates(R({}, RequestGroup("1", {"VGPU": 1}, member_of=[[AGG]])))[
        "allocation_requests"] == []


def test_member_of_lists_are_met_by_one_provider_or_by_the_root():
    f = Fleet()
    f.add("cn", {"VCPU": 4}, aggs=[AGG])
    f.add("gpu", {"VGPU": 1}, aggs=[AGG2], parent="cn")
    index = f.index()
    # the child meets [AGG2] only, the root [AGG] only: neither meets both
    assert index.candidates(R({"VGPU": 1}, member_of=[[AGG], [AGG2]]))[
        "allocation_requests"] == []
    assert len(index.candidates(R({"VGPU": 1}, member_of=[[AGG2]]))[
        "allocation_requests"]) == 1


def test_a_child_in_the_aggregate_anchors_its_root_for_sharing():
    f = Fleet()
    f.add("cn", {"VCPU": 4})
    f.add("numa", {"MEMORY_MB": 1024}, aggs=[AGG], parent="cn")
    f.add("ss", {"DISK_GB": 100}, [SHARING], aggs=[AGG])
    index = f.index()
    answer = index.candidates(R({"VCPU": 1, "DISK_GB": 10}))
    assert f.names(answer) == [
        ([("cn", "VCPU", 1), ("ss", "DISK_GB", 10)], [("", ["cn", "ss"])])]
    assert set(answer["provider_summaries"]) == {f.u["cn"], f.u["numa"], f.u["ss"]}
    assert index.fit(R({"VCPU": 1, "DISK_GB": 10})).uuids() == [f.u["cn"]]


def test_a_sharing_provider_fills_a_granular_group():
    f = Fleet()
    f.add("cn", {"VCPU": 4}, aggs=[AGG])
    f.add("ss", {"DISK_GB": 100}, [SHARING], aggs=[AGG])
    answer = f.index().candidates(R({"VCPU": 1}, RequestGroup("1", {"DISK_GB": 10})))
    assert f.names(answer) == [
        ([("cn", "VCPU", 1), ("ss", "DISK_GB", 10)], [("", ["cn"]), ("1", ["ss"])])]


def test_in_tree_with_a_child_means_its_whole_tree(gpu_host):
    f = gpu_host
    f.add("cn2", {"VCPU": 8})
    index = f.index()
    r = R({"VCPU": 1}, in_tree=f.u["gpu1"])
    assert [a for a, _ in f.names(index.candidates(r))] == [[("cn", "VCPU", 1)]]
    assert index.fit(r).uuids() == [f.u["cn"]]


def test_root_required_applies_to_the_root_only(gpu_host):
    f = gpu_host
    index = f.index()
    assert index.candidates(R({"VGPU": 1}, root_required=["CUSTOM_A"]))[
        "allocation_requests"] == []
    assert len(index.candidates(R({"VGPU": 1}, root_required=["HW_CPU_X86_AVX2"]))[
        "allocation_requests"]) == 2


def test_released_frees_child_providers(gpu_host):
    """A moving server's vGPU sits on a child of the source: released, the
    child counts as free (and the summaries show it)."""
    f = gpu_host
    server = {"cn": {"VCPU": 8}, "gpu1": {"VGPU": 1}, "gpu2": {"VGPU": 2}}
    f.use(server)
    index = f.index()
    r = R({"VCPU": 2}, RequestGroup("1", {"VGPU": 2}))
    assert len(index.fit(r)) == 0
    released = {f.u[k]: v for k, v in server.items()}
    fit = index.fit(r, released)
    assert fit.uuids() == [f.u["cn"]]
    assert fit.allocation_request(0)["mappings"]["1"] == [f.u["gpu2"]]
    answer = index.candidates(r, released)
    assert answer["provider_summaries"][f.u["gpu2"]]["resources"]["VGPU"]["used"] == 0
    # the index is as before afterwards
    assert index.usage(f.u["gpu2"]) == {"VGPU": 2}
    partly = {f.u["cn"]: {"VCPU": 8}, f.u["gpu1"]: {"VGPU": 1}}
    assert len(index.fit(r, partly)) == 0
    assert len(index.fit(R({"VCPU": 2}, RequestGroup("1", {"VGPU": 1})), partly)) == 1


def test_free_and_weighing_use_the_granular_supplier(gpu_host):
    f = gpu_host
    fit = f.index().fit(R({"VCPU": 1}, RequestGroup("1", {"VGPU": 1})))
    # the child with most free VGPU is preferred
    assert fit.allocation_request(0)["mappings"]["1"] == [f.u["gpu2"]]
    assert fit.free("VGPU").tolist() == [2]
    assert fit.free("VCPU").tolist() == [8]


def test_unknown_custom_names_are_placements_400(gpu_host):
    f = gpu_host
    index = f.index()
    with pytest.raises(errors.InvalidRequest, match="No such trait"):
        index.fit(R({"VCPU": 1}, forbidden=["CUSTOM_NEVER_CREATED"]))
    with pytest.raises(errors.InvalidRequest, match="resource class"):
        index.candidates(R({"CUSTOM_NO_SUCH_CLASS": 1}))
    # created in placement but on no provider: a forbidden one filters nothing
    f.p.create_trait("CUSTOM_UNUSED")
    index = f.index()
    assert len(index.fit(R({"VCPU": 1}, forbidden=["CUSTOM_UNUSED"]))) == 1
    # a source that did not read placement's names: ask placement
    index.set_known_names(None, None)
    with pytest.raises(errors.Unsupported):
        index.fit(R({"VCPU": 1}, forbidden=["CUSTOM_UNUSED"]))


def test_trees_follow_updates(gpu_host):
    f = gpu_host
    index = f.index()
    trees = index.trees()
    assert trees.nested and trees.n_roots == 1
    assert sorted(index.uuids[r] for r in trees.members(0)) == sorted(
        f.u[k] for k in ("cn", "gpu1", "gpu2"))
    f.add("cn2", {"VCPU": 1})
    f.add("gpu3", {"VGPU": 4}, parent="cn2")
    index.sync(f.p.snapshot())
    assert index.trees().n_roots == 2
    assert index.fit(R({}, RequestGroup("1", {"VGPU": 3}))).uuids() == [f.u["cn2"]]
    f.p.delete_provider(f.u["gpu3"])
    index.sync(f.p.snapshot())
    assert len(index.fit(R({}, RequestGroup("1", {"VGPU": 3})))) == 0
    gpu2, cn, cn2 = (index.row_of[f.u[k]] for k in ("gpu2", "cn", "cn2"))
    upper = np.array([cn, gpu2, gpu2, cn2])
    lower = np.array([gpu2, cn, gpu2, gpu2])
    assert index.trees().is_ancestor_or_self(upper, lower).tolist() == [
        True, False, True, False]


def test_a_child_whose_root_is_missing_takes_part_in_nothing(gpu_host):
    """A stale cache may hold a child without its root: it is left out."""
    f = gpu_host
    snap = f.p.snapshot()
    partial = type(snap)(tuple(r for r in snap.providers if r.provider.uuid != f.u["cn"]),
                         snap.custom_traits, snap.custom_classes)
    index = CapacityIndex.from_snapshot(partial)
    assert index.trees().n_roots == 0
    assert index.candidates(R({"VGPU": 1}))["allocation_requests"] == []


def test_forbidden_aggregates_leave_later_answers_alone():
    """Regression: the root-trait filter is cached per index; a query that
    narrowed the cached array in place (the unnumbered group's forbidden
    aggregates) changed every later answer with the same root filter."""
    f = Fleet()
    f.add("cn1", {"VCPU": 4}, aggs=[AGG])
    f.add("cn2", {"VCPU": 4})
    f.add("gpu", {"VGPU": 1}, parent="cn2")
    index = f.index()
    r = R({"VCPU": 1}, root_forbidden=["COMPUTE_STATUS_DISABLED"])
    before = f.names(index.candidates(r))
    assert len(before) == 2
    narrowed = R({"VCPU": 1}, root_forbidden=["COMPUTE_STATUS_DISABLED"],
                 forbidden_aggregates=[AGG])
    assert len(index.candidates(narrowed)["allocation_requests"]) == 1
    assert f.names(index.candidates(r)) == before
    assert len(index.fit(r)) == 2
