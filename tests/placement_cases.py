"""Bad-input and refused-write cases shared by the embedded (unit) and the
real-placement (functional) tests.

Everything here goes through the ``PlacementClient`` protocol only, so the
same case runs against ``EmbeddedPlacement`` and ``HttpPlacement``. Names and
UUIDs are fresh per fleet so that cases can share one real placement.
"""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from typing import Any, Callable

import pytest

from scheduler_ext import errors
from scheduler_ext.placement.model import AllocationWrite, Inventory


@dataclasses.dataclass
class Fleet:
    """Two compute nodes, a custom class and trait, an aggregate, two
    consumers (c1 on cn1, c2 filling cn2 to its float capacity)."""

    tag: str
    custom_rc: str
    custom_trait: str
    cn1: str
    cn2: str
    agg: str
    c1: str
    c2: str
    # consumers a case may touch (kept in the snapshot)
    extra: list[str] = dataclasses.field(default_factory=list)

    @property
    def providers(self) -> list[str]:
        return [self.cn1, self.cn2]

    @property
    def consumers(self) -> list[str]:
        return [self.c1, self.c2] + self.extra

    def new_consumer(self) -> str:
        c = str(uuidlib.uuid4())
        self.extra.append(c)
        return c


def write(allocs, generation, project_id="proj", user_id="user",
          consumer_type="INSTANCE") -> AllocationWrite:
    return AllocationWrite(allocs, project_id, user_id, generation, consumer_type)


def build_fleet(p) -> Fleet:
    tag = uuidlib.uuid4().hex[:12].upper()
    custom_rc, custom_trait = f"CUSTOM_BAD_{tag}", f"CUSTOM_BADT_{tag}"
    p.create_resource_class(custom_rc)
    p.create_trait(custom_trait)
    cn1 = p.create_provider(f"bad-input-{tag}-cn1").uuid
    cn2 = p.create_provider(f"bad-input-{tag}-cn2").uuid
    p.set_inventories(cn1, 0, {
        "VCPU": Inventory(8, 0, 1, 8, 1, 4.0),
        "MEMORY_MB": Inventory(4096, 512, 256, 4096, 256, 1.5),
        custom_rc: Inventory(2)})
    p.set_inventories(cn2, 0, {"VCPU": Inventory(100, 0, 1, 100, 1, 0.57)})
    p.set_traits(cn1, 1, ["HW_CPU_X86_AVX2", custom_trait])
    agg = str(uuidlib.uuid4())
    p.set_aggregates(cn1, 2, [agg])
    c1, c2 = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    p.put_allocations(c1, write({cn1: {"VCPU": 4, "MEMORY_MB": 1024}}, None))
    # (100 - 0) * 0.57 = 56.99999999999999: 56 fits, 57 would not
    p.put_allocations(c2, write({cn2: {"VCPU": 56}}, None))
    return Fleet(tag, custom_rc, custom_trait, cn1, cn2, agg, c1, c2)


def state(p, fleet: Fleet) -> dict:
    """Everything observable about the fleet: provider identity and
    generation, inventories, usages, traits, aggregates, allocations per
    provider and per consumer (with consumer generations)."""
    out: dict[str, Any] = {}
    for rp in fleet.providers:
        prov = p.get_provider(rp)
        out[rp] = (prov, p.get_inventories(rp), p.get_usages(rp),
                   p.get_traits(rp), p.get_aggregates(rp),
                   p.get_provider_allocations(rp))
    for c in fleet.consumers:
        out[c] = p.get_consumer(c)
    return out


# --------------------------------------------------------------- bad input
# Each case: (id, make) where make(fleet) -> (call(p), field, value).
BadCase = tuple[str, Callable[[Fleet], tuple[Callable[[Any], Any], str, Any]]]


def _inv(**kw) -> Inventory:
    base = dict(total=8, reserved=0, min_unit=1, max_unit=8, step_size=1,
                allocation_ratio=1.0)
    base.update(kw)
    return Inventory(**base)


def _set_vcpu(f: Fleet, inv: Inventory):
    return lambda p: p.set_inventories(f.cn1, p.get_provider(f.cn1).generation,
                                       {"VCPU": inv})


def _put_c1(f: Fleet, allocs, **kw):
    return lambda p: p.put_allocations(
        f.c1, write(allocs, p.get_consumer(f.c1).generation, **kw))


BAD_INPUT_CASES: list[BadCase] = [
    ("total-zero", lambda f: (_set_vcpu(f, _inv(total=0)),
                              "inventories[VCPU].total", 0)),
    ("total-negative", lambda f: (_set_vcpu(f, _inv(total=-4)),
                                  "inventories[VCPU].total", -4)),
    ("reserved-negative", lambda f: (_set_vcpu(f, _inv(reserved=-1)),
                                     "inventories[VCPU].reserved", -1)),
    ("reserved-above-total", lambda f: (_set_vcpu(f, _inv(total=8, reserved=9)),
                                        "inventories[VCPU].reserved", 9)),
    ("step-size-zero", lambda f: (_set_vcpu(f, _inv(step_size=0)),
                                  "inventories[VCPU].step_size", 0)),
    ("min-unit-zero", lambda f: (_set_vcpu(f, _inv(min_unit=0)),
                                 "inventories[VCPU].min_unit", 0)),
    ("max-unit-below-min-unit", lambda f: (_set_vcpu(f, _inv(min_unit=4, max_unit=2)),
                                           "inventories[VCPU].max_unit", 2)),
    ("ratio-zero", lambda f: (_set_vcpu(f, _inv(allocation_ratio=0.0)),
                              "inventories[VCPU].allocation_ratio", 0.0)),
    ("ratio-negative", lambda f: (_set_vcpu(f, _inv(allocation_ratio=-1.5)),
                                  "inventories[VCPU].allocation_ratio", -1.5)),
    ("ratio-bool", lambda f: (_set_vcpu(f, _inv(allocation_ratio=True)),
                              "inventories[VCPU].allocation_ratio", True)),
    ("total-bool", lambda f: (_set_vcpu(f, _inv(total=True)),
                              "inventories[VCPU].total", True)),
    ("total-float", lambda f: (_set_vcpu(f, _inv(total=8.0)),
                               "inventories[VCPU].total", 8.0)),
    ("unknown-standard-class-inventory", lambda f: (
        lambda p: p.set_inventories(f.cn1, p.get_provider(f.cn1).generation,
                                    {"VCPUS": _inv()}),
        "resource_class", "VCPUS")),
    ("lowercase-class-inventory", lambda f: (
        lambda p: p.set_inventories(f.cn1, p.get_provider(f.cn1).generation,
                                    {"custom_gpu": _inv()}),
        "resource_class", "custom_gpu")),
    ("unknown-standard-class-allocation", lambda f: (
        _put_c1(f, {f.cn1: {"VCPU": 1, "GPUS": 1}}),
        f"allocations[{f.cn1}] resource class", "GPUS")),
    ("unknown-standard-trait", lambda f: (
        lambda p: p.set_traits(f.cn1, p.get_provider(f.cn1).generation,
                               ["HW_CPU_X86_AVX2", "HW_CPU_X86_AVX9000"]),
        "traits", "HW_CPU_X86_AVX9000")),
    ("custom-class-without-prefix", lambda f: (
        lambda p: p.create_resource_class("FPGA_THING"),
        "resource_class", "FPGA_THING")),
    ("custom-trait-without-prefix", lambda f: (
        lambda p: p.create_trait("FAST_DISK"), "trait", "FAST_DISK")),
    ("traits-as-string", lambda f: (
        lambda p: p.set_traits(f.cn1, p.get_provider(f.cn1).generation,
                               "HW_CPU_X86_AVX2"),
        "traits", "HW_CPU_X86_AVX2")),
    ("malformed-provider-uuid-inventories", lambda f: (
        lambda p: p.set_inventories("not-a-uuid", 0, {"VCPU": _inv()}),
        "resource_provider_uuid", "not-a-uuid")),
    ("malformed-provider-uuid-delete", lambda f: (
        lambda p: p.delete_provider(f.cn1[:-1]),
        "resource_provider_uuid", f.cn1[:-1])),
    ("malformed-provider-uuid-create", lambda f: (
        lambda p: p.create_provider(f"bad-input-{f.tag}-x", uuid="1234"),
        "uuid", "1234")),
    ("malformed-parent-uuid", lambda f: (
        lambda p: p.create_provider(f"bad-input-{f.tag}-y",
                                    parent_provider_uuid=f.cn1 + "0"),
        "parent_provider_uuid", f.cn1 + "0")),
    ("malformed-provider-uuid-in-allocations", lambda f: (
        _put_c1(f, {"cn1": {"VCPU": 1}}), "allocations provider", "cn1")),
    ("malformed-consumer-uuid-put", lambda f: (
        lambda p: p.put_allocations("c1", write({f.cn1: {"VCPU": 1}}, None)),
        "consumer_uuid", "c1")),
    ("malformed-consumer-uuid-post", lambda f: (
        lambda p: p.post_allocations({
            f.c1: write({}, p.get_consumer(f.c1).generation),
            "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz": write({f.cn1: {"VCPU": 4}}, None)}),
        "consumer_uuid", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz")),
    ("malformed-consumer-uuid-delete", lambda f: (
        lambda p: p.delete_allocations(f.c1.replace("-", "_")),
        "consumer_uuid", f.c1.replace("-", "_"))),
    ("malformed-aggregate-uuid", lambda f: (
        lambda p: p.set_aggregates(f.cn1, p.get_provider(f.cn1).generation,
                                   [f.agg, "agg-1"]),
        "aggregates", "agg-1")),
    ("zero-amount", lambda f: (_put_c1(f, {f.cn1: {"VCPU": 0}}),
                               f"allocations[{f.cn1}][VCPU]", 0)),
    ("negative-amount", lambda f: (_put_c1(f, {f.cn1: {"VCPU": -2}}),
                                   f"allocations[{f.cn1}][VCPU]", -2)),
    ("bool-amount", lambda f: (_put_c1(f, {f.cn1: {"VCPU": True}}),
                               f"allocations[{f.cn1}][VCPU]", True)),
    ("float-amount", lambda f: (_put_c1(f, {f.cn1: {"VCPU": 1.0}}),
                                f"allocations[{f.cn1}][VCPU]", 1.0)),
    ("amount-above-max-int", lambda f: (_put_c1(f, {f.cn1: {"VCPU": 2**31}}),
                                        f"allocations[{f.cn1}][VCPU]", 2**31)),
    ("empty-resources", lambda f: (_put_c1(f, {f.cn1: {}}),
                                   f"allocations[{f.cn1}]", {})),
    ("empty-project-id", lambda f: (_put_c1(f, {f.cn1: {"VCPU": 1}}, project_id=""),
                                    "project_id", "")),
    ("empty-user-id", lambda f: (_put_c1(f, {f.cn1: {"VCPU": 1}}, user_id=""),
                                 "user_id", "")),
    ("empty-project-id-post", lambda f: (
        lambda p: p.post_allocations({
            f.c1: write({}, p.get_consumer(f.c1).generation),
            str(uuidlib.uuid4()): write({f.cn1: {"VCPU": 4}}, None, project_id="")}),
        "project_id", "")),
    ("bad-consumer-type", lambda f: (_put_c1(f, {f.cn1: {"VCPU": 1}},
                                             consumer_type="instance"),
                                     "consumer_type", "instance")),
    ("negative-consumer-generation", lambda f: (
        lambda p: p.put_allocations(f.c1, write({f.cn1: {"VCPU": 1}}, -1)),
        "consumer_generation", -1)),
    ("negative-provider-generation", lambda f: (
        lambda p: p.set_inventories(f.cn1, -1, {"VCPU": _inv()}),
        "resource_provider_generation", -1)),
    ("empty-provider-name", lambda f: (lambda p: p.create_provider(""), "name", "")),
    ("no-consumers-in-post", lambda f: (lambda p: p.post_allocations({}),
                                        "allocations", {})),
]


# ---------------------------------------------------------- refused writes
# Each case: (id, make) where make(fleet) -> (call(p), exception class, code).
ConflictCase = tuple[str, Callable[[Fleet], tuple[Callable[[Any], Any], type, str]]]


def _post_grow_with_new(f: Fleet):
    new = f.new_consumer()
    return lambda p: p.post_allocations({
        new: write({f.cn1: {"VCPU": 1}}, None),
        f.c2: write({f.cn2: {"VCPU": 57}}, p.get_consumer(f.c2).generation)})


def _post_move_bad_target(f: Fleet):
    mig = f.new_consumer()

    def call(p):
        old = p.get_consumer(f.c1)
        p.post_allocations({
            f.c1: write({}, old.generation),
            mig: write(old.allocations, 0, consumer_type="MIGRATION")})
    return call


def _post_sum_over_capacity(f: Fleet):
    a, b = f.new_consumer(), f.new_consumer()
    # cn2 VCPU capacity 56.99..: c2 shrinks 56 -> 40; 40 + 10 fits, but
    # 40 + 10 + 10 (both new consumers together) does not
    return lambda p: p.post_allocations({
        f.c2: write({f.cn2: {"VCPU": 40}}, p.get_consumer(f.c2).generation),
        a: write({f.cn2: {"VCPU": 10}}, None),
        b: write({f.cn2: {"VCPU": 10}}, None)})


CONFLICT = errors.CONCURRENT_UPDATE
CONFLICT_CASES: list[ConflictCase] = [
    ("put-capacity-float-boundary", lambda f: (
        lambda p: p.put_allocations(
            f.c2, write({f.cn2: {"VCPU": 57}}, p.get_consumer(f.c2).generation)),
        errors.CapacityExceeded, errors.UNDEFINED_CODE)),
    ("put-capacity-new-consumer", lambda f: (
        lambda p, c=f.new_consumer(): p.put_allocations(
            c, write({f.cn2: {"VCPU": 1}}, None)),
        errors.CapacityExceeded, errors.UNDEFINED_CODE)),
    ("put-below-min-unit", lambda f: (
        _put_c1(f, {f.cn1: {"VCPU": 1, "MEMORY_MB": 128}}),
        errors.CapacityExceeded, errors.UNDEFINED_CODE)),
    ("put-off-step", lambda f: (
        _put_c1(f, {f.cn1: {"VCPU": 1, "MEMORY_MB": 1000}}),
        errors.CapacityExceeded, errors.UNDEFINED_CODE)),
    ("put-above-max-unit", lambda f: (
        _put_c1(f, {f.cn1: {"VCPU": 9}}),
        errors.CapacityExceeded, errors.UNDEFINED_CODE)),
    ("put-no-inventory-of-class", lambda f: (
        _put_c1(f, {f.cn1: {"VCPU": 1}, f.cn2: {"MEMORY_MB": 256}}),
        errors.CapacityExceeded, errors.UNDEFINED_CODE)),
    ("put-null-generation-existing-consumer", lambda f: (
        lambda p: p.put_allocations(f.c1, write({f.cn1: {"VCPU": 1}}, None)),
        errors.ConcurrentUpdate, CONFLICT)),
    ("put-stale-generation", lambda f: (
        lambda p: p.put_allocations(
            f.c1, write({f.cn1: {"VCPU": 1}}, p.get_consumer(f.c1).generation + 1)),
        errors.ConcurrentUpdate, CONFLICT)),
    ("put-generation-for-new-consumer", lambda f: (
        lambda p, c=f.new_consumer(): p.put_allocations(
            c, write({f.cn1: {"VCPU": 1}}, 0)),
        errors.ConcurrentUpdate, CONFLICT)),
    ("empty-with-stale-generation", lambda f: (
        lambda p: p.put_allocations(f.c1, write({}, 0)),
        errors.ConcurrentUpdate, CONFLICT)),
    ("post-capacity-second-consumer", lambda f: (
        _post_grow_with_new(f), errors.CapacityExceeded, errors.UNDEFINED_CODE)),
    ("post-capacity-summed-across-consumers", lambda f: (
        _post_sum_over_capacity(f), errors.CapacityExceeded, errors.UNDEFINED_CODE)),
    ("post-move-target-generation-conflict", lambda f: (
        _post_move_bad_target(f), errors.ConcurrentUpdate, CONFLICT)),
    ("inventories-stale-generation", lambda f: (
        lambda p: p.set_inventories(f.cn2, p.get_provider(f.cn2).generation - 1,
                                    {"VCPU": _inv(total=200)}),
        errors.ConcurrentUpdate, CONFLICT)),
    ("inventories-remove-class-in-use", lambda f: (
        lambda p: p.set_inventories(f.cn2, p.get_provider(f.cn2).generation,
                                    {"DISK_GB": _inv()}),
        errors.InUse, errors.INVENTORY_INUSE)),
    ("traits-stale-generation", lambda f: (
        lambda p: p.set_traits(f.cn1, p.get_provider(f.cn1).generation - 1, []),
        errors.ConcurrentUpdate, CONFLICT)),
    ("aggregates-stale-generation", lambda f: (
        lambda p: p.set_aggregates(f.cn1, p.get_provider(f.cn1).generation + 3, []),
        errors.ConcurrentUpdate, CONFLICT)),
    ("delete-provider-with-allocations", lambda f: (
        lambda p: p.delete_provider(f.cn2),
        errors.InUse, errors.PROVIDER_IN_USE)),
    ("create-provider-duplicate-name", lambda f: (
        lambda p: p.create_provider(f"bad-input-{f.tag}-cn1"),
        errors.Conflict, errors.DUPLICATE_NAME)),
    ("create-provider-duplicate-uuid", lambda f: (
        lambda p: p.create_provider(f"bad-input-{f.tag}-other", uuid=f.cn2),
        errors.Conflict, errors.DUPLICATE_NAME)),
    ("delete-allocations-of-consumer-with-none", lambda f: (
        lambda p, c=f.new_consumer(): p.delete_allocations(c),
        errors.NotFound, errors.UNDEFINED_CODE)),
]


def check_bad_input(p, make, fleet: Fleet | None = None) -> None:
    """The call raises InvalidRequest naming the field and the value, and
    nothing observable changes. ``fleet`` may be shared between cases,
    since each compares its own before and after."""
    fleet = fleet or build_fleet(p)
    call, field, value = make(fleet)
    before = state(p, fleet)
    with pytest.raises(errors.InvalidRequest) as info:
        call(p)
    exc = info.value
    assert exc.status == 400
    assert exc.field == field
    assert exc.value == value and type(exc.value) is type(value)
    assert field in str(exc) and repr(value) in str(exc)
    assert state(p, fleet) == before


def check_refused(p, make, fleet: Fleet | None = None) -> None:
    """The call is refused with the expected class and code, nothing
    observable changes, and no consumer record is left behind (a new
    consumer named by the refused write can still be claimed with a null
    generation)."""
    fleet = fleet or build_fleet(p)
    call, cls, code = make(fleet)
    before = state(p, fleet)
    with pytest.raises(cls) as info:
        call(p)
    assert type(info.value) is cls
    assert info.value.code == code
    assert state(p, fleet) == before
    for c in fleet.extra:
        p.put_allocations(c, write({fleet.cn1: {"VCPU": 1}}, None))
        p.delete_allocations(c)


def check_missing_provider_write(p) -> None:
    """A write naming a provider that does not exist: 400 and no allocation
    changes; placement keeps the consumer record it created (generation 0,
    no allocations), so a null generation is then refused and 0 accepted."""
    fleet = build_fleet(p)
    before = state(p, fleet)
    c = fleet.new_consumer()
    with pytest.raises(errors.InvalidRequest) as info:
        p.put_allocations(c, AllocationWrite(
            {fleet.cn1: {"VCPU": 1}, str(uuidlib.uuid4()): {"VCPU": 1}},
            "proj", "user", None))
    assert info.value.status == 400
    assert state(p, fleet) == dict(before, **{c: p.get_consumer(c)})
    assert p.get_consumer(c).allocations == {}
    with pytest.raises(errors.ConcurrentUpdate):
        p.put_allocations(c, AllocationWrite({fleet.cn1: {"VCPU": 1}},
                                             "proj", "user", None))
    p.put_allocations(c, AllocationWrite({fleet.cn1: {"VCPU": 1}},
                                         "proj", "user", 0))
