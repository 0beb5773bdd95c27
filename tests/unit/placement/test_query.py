"""CandidateRequest: validation, and placement query strings both ways."""

import pytest

from scheduler_ext import errors
from scheduler_ext.placement.query import CandidateRequest

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


@pytest.mark.parametrize("key", ["resources1", "required_FOO", "member_of2",
                                 "in_tree3", "same_subtree"])
def test_granular_and_same_subtree_unsupported(key):
    with pytest.raises(errors.Unsupported):
        CandidateRequest.from_query([("resources", "VCPU:1"), (key, "x")])


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
