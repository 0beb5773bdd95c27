"""CandidateRequest: validation, and placement query strings both ways."""

from urllib import parse

import pytest

from scheduler_ext import errors
from scheduler_ext.placement.query import CandidateRequest, RequestGroup

AGG = "8592a199-7d73-4465-8df6-ab00a6243c82"
AGG2 = "ddbd9226-d6a6-475e-a85f-0609914dd058"


def invalid(field, value, **kwargs):
    with pytest.raises(errors.InvalidRequest) as exc:
        CandidateRequest(**kwargs)
    assert exc.value.field == field, exc.value
    assert exc.value.value == value, exc.value
    return exc.value


def test_unknown_resource_class():
    err = invalid("resources", "FLOPS", resources={"FLOPS": 1})
    assert "FLOPS" in str(err)
    invalid("resources", "custom_lower", resources={"custom_lower": 1})


@pytest.mark.parametrize("amount", [0, -1])
def test_amount_must_be_positive(amount):
    err = invalid("resources[VCPU]", amount, resources={"VCPU": amount})
    assert str(amount) in str(err)


def test_amount_must_be_an_integer():
    invalid("resources[VCPU]", 1.5, resources={"VCPU": 1.5})
    invalid("resources[VCPU]", True, resources={"VCPU": True})


def test_resources_required():
    invalid("resources", {}, resources={})


def test_malformed_trait():
    invalid("required", "lower_case", resources={"VCPU": 1},
            required=frozenset(["lower_case"]))
    invalid("forbidden", "NOT_A_STANDARD_TRAIT", resources={"VCPU": 1},
            forbidden=frozenset(["NOT_A_STANDARD_TRAIT"]))
    invalid("root_required", "x", resources={"VCPU": 1}, root_required=["x"])


def test_malformed_aggregate_uuid():
    invalid("member_of", "not-a-uuid", resources={"VCPU": 1},
            member_of=(["not-a-uuid"],))
    invalid("forbidden_aggregates", "1234", resources={"VCPU": 1},
            forbidden_aggregates=["1234"])
    invalid("in_tree", "nope", resources={"VCPU": 1}, in_tree="nope")


def test_trait_both_required_and_forbidden():
    err = invalid("required", "HW_CPU_X86_AVX2", resources={"VCPU": 1},
                  required=["HW_CPU_X86_AVX2"], forbidden=["HW_CPU_X86_AVX2"])
    assert "both required and forbidden" in str(err)


def test_any_of_group_conflicts_only_when_all_forbidden():
    # placement's rule: (A or B) with !A is fine, (A or B) with !A !B is not
    CandidateRequest({"VCPU": 1}, required_any=(["CUSTOM_A", "CUSTOM_B"],),
                     forbidden=["CUSTOM_A"])
    invalid("required_any", ["CUSTOM_A", "CUSTOM_B"], resources={"VCPU": 1},
            required_any=(["CUSTOM_A", "CUSTOM_B"],),
            forbidden=["CUSTOM_A", "CUSTOM_B"])


def test_root_trait_conflict():
    invalid("root_required", "CUSTOM_X", resources={"VCPU": 1},
            root_required=["CUSTOM_X"], root_forbidden=["CUSTOM_X"])


def test_limit_positive():
    invalid("limit", 0, resources={"VCPU": 1}, limit=0)


def test_strings_are_not_collections():
    invalid("required", "CUSTOM_X", resources={"VCPU": 1}, required="CUSTOM_X")


def test_normalizes():
    r = CandidateRequest({"VCPU": 2}, member_of=([AGG.upper()],),
                         required=["CUSTOM_X"], required_any=[("CUSTOM_A", "CUSTOM_B")])
    assert r.member_of == (frozenset([AGG]),)
    assert r.required == frozenset(["CUSTOM_X"])
    assert r.trait_groups == (frozenset(["CUSTOM_X"]),
                              frozenset(["CUSTOM_A", "CUSTOM_B"]))


def test_query_round_trip():
    r = CandidateRequest(
        {"VCPU": 2, "MEMORY_MB": 512}, required=["CUSTOM_X"], forbidden=["CUSTOM_Y"],
        required_any=[("CUSTOM_A", "CUSTOM_B")], member_of=([AGG], [AGG, AGG2]),
        forbidden_aggregates=[AGG2], in_tree=AGG, root_required=["CUSTOM_R"],
        root_forbidden=["COMPUTE_STATUS_DISABLED"], limit=10)
    q = r.to_query()
    assert ("required", "in:CUSTOM_A,CUSTOM_B") in q
    assert ("member_of", f"!{AGG2}") in q
    assert ("root_required", "CUSTOM_R,!COMPUTE_STATUS_DISABLED") in q
    assert CandidateRequest.from_query(q) == r


def test_from_query_mapping_form():
    r = CandidateRequest.from_query({
        "resources": "VCPU:1,DISK_GB:10",
        "required": ["CUSTOM_X,!CUSTOM_Y", "in:CUSTOM_A,CUSTOM_B"],
        "member_of": [f"in:{AGG},{AGG2}", f"!in:{AGG2}"],
        "limit": "5", "group_policy": "none"})
    assert r.resources == {"DISK_GB": 10, "VCPU": 1}
    assert r.forbidden == {"CUSTOM_Y"}
    assert r.member_of == (frozenset([AGG, AGG2]),)
    assert r.forbidden_aggregates == {AGG2}
    assert r.limit == 5


def test_granular_groups_parsed():
    r = CandidateRequest.from_query([
        ("resources", "VCPU:1"), ("resources1", "VGPU:1"),
        ("required1", "CUSTOM_VGPU_A,!CUSTOM_SLOW"), ("member_of1", AGG),
        ("in_tree1", AGG2), ("resources_NIC", "NET_BW_EGR_KILOBIT_PER_SEC:10"),
        ("group_policy", "isolate")])
    assert [g.suffix for g in r.granular] == ["1", "_NIC"]
    g = r.granular[0]
    assert g.resources == {"VGPU": 1}
    assert g.required == {"CUSTOM_VGPU_A"} and g.forbidden == {"CUSTOM_SLOW"}
    assert g.member_of == (frozenset([AGG]),) and g.in_tree == AGG2
    assert r.isolate and r.resources == {"VCPU": 1}
    assert [x.suffix for x in r.groups] == ["", "1", "_NIC"]
    assert r.total_resources() == {"VCPU": 1, "VGPU": 1,
                                   "NET_BW_EGR_KILOBIT_PER_SEC": 10}


def test_granular_round_trip():
    r = CandidateRequest(
        {"VCPU": 1},
        granular=(RequestGroup("1", {"VGPU": 1}, required=["CUSTOM_A"],
                               required_any=[("CUSTOM_B", "CUSTOM_C")],
                               member_of=([AGG],), forbidden_aggregates=[AGG2],
                               in_tree=AGG),
                  RequestGroup("_agent", {}, required=["CUSTOM_AGENT"])),
        group_policy="none", same_subtree=[("1", "_agent")],
        root_forbidden=["COMPUTE_STATUS_DISABLED"])
    q = r.to_query()
    assert ("same_subtree", "1,_agent") in q
    assert ("required1", "in:CUSTOM_B,CUSTOM_C") in q
    assert ("member_of1", f"!{AGG2}") in q
    assert CandidateRequest.from_query(q) == r


def test_the_unnumbered_group_is_the_requests_own_fields():
    r = CandidateRequest({"VCPU": 2, "DISK_GB": 10}, required={"HW_CPU_X86_AVX"},
                         forbidden={"CUSTOM_SLOW"},
                         required_any=[{"CUSTOM_A", "CUSTOM_B"}],
                         member_of=[[AGG.upper(), AGG2]],
                         forbidden_aggregates={AGG2}, in_tree=AGG)
    built = RequestGroup("", {"VCPU": 2, "DISK_GB": 10}, {"HW_CPU_X86_AVX"},
                         {"CUSTOM_SLOW"}, ({"CUSTOM_A", "CUSTOM_B"},),
                         ([AGG, AGG2],), {AGG2}, AGG)
    assert r.unnumbered == built
    assert r.groups == (built,) and r.unnumbered.trait_groups == built.trait_groups
    assert not r.unnumbered.granular


def test_only_granular_groups():
    r = CandidateRequest.from_query([("resources1", "VGPU:1")])
    assert r.resources == {} and r.unnumbered is None
    assert [g.suffix for g in r.groups] == ["1"]


@pytest.mark.parametrize("params,field", [
    # more than one granular group needs group_policy
    ([("resources1", "VGPU:1"), ("resources2", "VGPU:1")], "group_policy"),
    ([("resources1", "VGPU:1"), ("group_policy", "all")], "group_policy"),
    # a resourceless group must be named in same_subtree
    ([("resources", "VCPU:1"), ("required1", "CUSTOM_X")], "resources1"),
    ([("resources1", "VGPU:1"), ("same_subtree", "1,2")], "same_subtree"),
    ([("resources1", "VGPU:1"), ("same_subtree", ",1")], "same_subtree"),
    # the unnumbered group is never resourceless
    ([("resources1", "VGPU:1"), ("required", "CUSTOM_X")], "resources"),
    ([("resources1", "VGPU:1"), ("in_tree", AGG)], "resources"),
])
def test_granular_bad_input(params, field):
    with pytest.raises(errors.InvalidRequest) as exc:
        CandidateRequest.from_query(params)
    assert exc.value.field == field, exc.value


def test_resourceless_group_in_same_subtree():
    r = CandidateRequest.from_query([
        ("resources1", "NET_BW_EGR_KILOBIT_PER_SEC:10"), ("required2", "CUSTOM_AGENT"),
        ("same_subtree", "1,2"), ("group_policy", "none")])
    assert r.granular[1].resources == {}
    assert r.same_subtree == (frozenset(["1", "2"]),)


def test_repeated_required_keeps_the_last_below_1_39():
    q = [("resources", "VCPU:1"), ("required", "CUSTOM_A"), ("required", "CUSTOM_B,!CUSTOM_C")]
    old = CandidateRequest.from_query(q, microversion="1.38")
    assert old.required == {"CUSTOM_B"} and old.forbidden == {"CUSTOM_C"}
    new = CandidateRequest.from_query(q)
    assert new.required == {"CUSTOM_A", "CUSTOM_B"} and new.forbidden == {"CUSTOM_C"}
    granular = [("resources1", "VGPU:1"), ("required1", "CUSTOM_A"), ("required1", "CUSTOM_B")]
    assert CandidateRequest.from_query(granular, microversion="1.36").granular[0].required \
        == {"CUSTOM_B"}


@pytest.mark.parametrize("version,params,field", [
    ("1.38", [("resources", "VCPU:1"), ("required", "in:CUSTOM_A,CUSTOM_B")], "required"),
    ("1.24", [("resources1", "VGPU:1")], "resources1"),
    ("1.32", [("resources_GPU", "VGPU:1")], "resources_GPU"),
    ("1.30", [("resources", "VCPU:1"), ("in_tree", AGG)], "in_tree"),
    ("1.34", [("resources", "VCPU:1"), ("root_required", "CUSTOM_A")], "root_required"),
    ("1.35", [("resources1", "VGPU:1"), ("same_subtree", "1")], "same_subtree"),
    ("1.21", [("resources", "VCPU:1"), ("required", "!CUSTOM_A")], "required"),
    ("1.31", [("resources", "VCPU:1"), ("member_of", f"!{AGG}")], "member_of"),
    ("1.23", [("resources", "VCPU:1"), ("member_of", AGG), ("member_of", AGG2)],
     "member_of"),
    ("1.15", [("resources", "VCPU:1"), ("limit", "2")], "limit"),
    ("1.40", [("resources", "VCPU:1")], "microversion"),
    ("2.1", [("resources", "VCPU:1")], "microversion"),
])
def test_microversion_rules(version, params, field):
    with pytest.raises(errors.InvalidRequest) as exc:
        CandidateRequest.from_query(params, microversion=version)
    assert exc.value.field == field, exc.value


def test_nova_query_at_1_36():
    """What nova 34 sends (microversion 1.36) for a server with a QoS port:
    the port's group is suffixed with the port's uuid."""
    port = "5b7b6e2c-7a1f-4a5c-9b8e-3a1f0c2d4e6f"
    query = ("group_policy=none&limit=1000"
             "&resources=DISK_GB%3A1%2CMEMORY_MB%3A512%2CVCPU%3A1"
             f"&resources{port}=NET_BW_EGR_KILOBIT_PER_SEC%3A1000"
             f"&required{port}=CUSTOM_PHYSNET_NET0%2CCUSTOM_VNIC_TYPE_NORMAL"
             "&root_required=%21COMPUTE_STATUS_DISABLED")
    r = CandidateRequest.from_query(parse.parse_qsl(query), microversion="1.36")
    assert r.granular[0].suffix == port
    assert r.granular[0].required == {"CUSTOM_PHYSNET_NET0", "CUSTOM_VNIC_TYPE_NORMAL"}
    assert r.root_forbidden == {"COMPUTE_STATUS_DISABLED"}
    assert r.limit == 1000 and r.group_policy == "none"


@pytest.mark.parametrize("params,field", [
    ([("resources", "VCPU:1"), ("bogus", "1")], "bogus"),
    ([("resources", "VCPU")], "resources"),
    ([("resources", "VCPU:x")], "resources"),
    ([("resources", "VCPU:0")], "resources[VCPU]"),
    ([("resources", "VCPU:1,VCPU:2")], "resources"),
    ([("resources", "VCPU:1"), ("member_of", f"{AGG},{AGG2}")], "member_of"),
    ([("resources", "VCPU:1"), ("limit", "-1")], "limit"),
    ([("resources", "VCPU:1"), ("resources", "VCPU:2")], "resources"),
    ([("required", "CUSTOM_X")], "resources"),
])
def test_from_query_bad_input(params, field):
    with pytest.raises(errors.InvalidRequest) as exc:
        CandidateRequest.from_query(params)
    assert exc.value.field == field
