"""The bad-input and refused-write cases of
``tests/unit/placement/test_placement_bad_input.py``, against a real placement through
``HttpPlacement``: bad input raises ``InvalidRequest`` naming the field and
value before anything is sent, refused writes map to the same exception
class and code as the embedded placement gives, and in both cases nothing
observable changes in placement.
"""

from __future__ import annotations


import pytest

from scheduler_ext import errors
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.placement.model import AllocationWrite, Inventory
from tests.placement_cases import (
    BAD_INPUT_CASES, CONFLICT_CASES, build_fleet, check_bad_input,
    check_missing_provider_write, check_refused, state)


@pytest.fixture(scope="module")
def fleet(placement_url):
    """One fleet for all cases: each case compares its own before and
    after, so a case that changed something would still fail itself."""
    return build_fleet(HttpPlacement.from_url(placement_url))


@pytest.mark.parametrize("make", [m for _, m in BAD_INPUT_CASES],
                         ids=[i for i, _ in BAD_INPUT_CASES])
def test_bad_input_is_rejected_and_changes_nothing(real_placement, fleet, make):
    check_bad_input(real_placement, make, fleet)


@pytest.mark.parametrize("make", [m for _, m in CONFLICT_CASES],
                         ids=[i for i, _ in CONFLICT_CASES])
def test_refused_write_changes_nothing(real_placement, fleet, make):
    check_refused(real_placement, make, fleet)


def test_write_naming_missing_provider_changes_no_allocations(real_placement):
    check_missing_provider_write(real_placement)



def test_uncreated_custom_class_is_invalid_request(real_placement):
    p = real_placement
    fleet = build_fleet(p)
    before = state(p, fleet)
    name = f"CUSTOM_NEVER_{fleet.tag}"
    gen = p.get_provider(fleet.cn1).generation
    with pytest.raises(errors.InvalidRequest):
        p.set_inventories(fleet.cn1, gen, {name: Inventory(4)})
    with pytest.raises(errors.InvalidRequest):
        p.put_allocations(fleet.c1, AllocationWrite(
            {fleet.cn1: {name: 1}}, "proj", "user",
            p.get_consumer(fleet.c1).generation))
    with pytest.raises(errors.InvalidRequest):
        p.set_traits(fleet.cn1, gen, [name])
    assert state(p, fleet) == before

