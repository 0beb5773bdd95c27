"""Focused tests of EmbeddedPlacement's placement semantics.

Each test pins one rule copied from placement 16.0.0 (see the module
docstring of ``scheduler_ext.placement.embedded`` and
``/work/shared/placement-semantics.md``); the differential test in
``tests/functional`` holds the same rules against the real service. The
hypothesis test at the end checks the accounting invariants over random
sequences of writes.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_ext import errors
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.model import AllocationWrite, Inventory

SHARES = "MISC_SHARES_VIA_AGGREGATE"


def new_uuid() -> str:
    return str(uuid.uuid4())


def w(allocs, generation=None, consumer_type="INSTANCE") -> AllocationWrite:
    return AllocationWrite(allocs, "proj", "user", generation, consumer_type)


def provider(p: EmbeddedPlacement, invs: dict, name: str | None = None,
             parent: str | None = None) -> str:
    rp = p.create_provider(name or new_uuid(), parent_provider_uuid=parent).uuid
    p.set_inventories(rp, 0, invs)
    return rp


def gen(p: EmbeddedPlacement, rp: str) -> int:
    return p.get_provider(rp).generation


def claim(p, rp, **resources) -> str:
    c = new_uuid()
    p.put_allocations(c, w({rp: resources}))
    return c


def rewrite(p, c, allocs):
    p.put_allocations(c, w(allocs, p.get_consumer(c).generation))


# ------------------------------------------------------- capacity arithmetic
@pytest.mark.parametrize("amount, fits", [(56, True), (57, False)])
def test_capacity_is_the_float_product(amount, fits):
    """(100 - 0) * 0.57 == 56.99999999999999: 56 fits, 57 does not."""
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(100, allocation_ratio=0.57)})
    c = new_uuid()
    if fits:
        p.put_allocations(c, w({rp: {"VCPU": amount}}))
        assert p.get_usages(rp) == {"VCPU": amount}
    else:
        with pytest.raises(errors.CapacityExceeded) as info:
            p.put_allocations(c, w({rp: {"VCPU": amount}}))
        assert info.value.status == 409
        assert info.value.code == errors.UNDEFINED_CODE
        assert p.get_usages(rp) == {"VCPU": 0}
        assert p.get_consumer(c).allocations == {}


def test_capacity_subtracts_reserved_before_the_ratio():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(10, reserved=2, allocation_ratio=1.5)})
    c = claim(p, rp, VCPU=12)
    with pytest.raises(errors.CapacityExceeded):
        claim(p, rp, VCPU=1)
    rewrite(p, c, {rp: {"VCPU": 11}})
    claim(p, rp, VCPU=1)


def test_reserved_equal_to_total_is_zero_capacity():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(4, reserved=4)})
    with pytest.raises(errors.CapacityExceeded):
        claim(p, rp, VCPU=1)


def test_min_max_step_apply_per_consumer_not_summed():
    p = EmbeddedPlacement()
    rp = provider(p, {"MEMORY_MB": Inventory(8192, min_unit=512, max_unit=2048,
                                             step_size=512)})
    for bad in (256, 1000, 2560):
        with pytest.raises(errors.CapacityExceeded):
            claim(p, rp, MEMORY_MB=bad)
    a, b = new_uuid(), new_uuid()
    p.post_allocations({a: w({rp: {"MEMORY_MB": 2048}}),
                        b: w({rp: {"MEMORY_MB": 2048}})})
    assert p.get_usages(rp) == {"MEMORY_MB": 4096}


def test_post_sums_consumers_on_the_same_provider():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(10)})
    a, b = new_uuid(), new_uuid()
    with pytest.raises(errors.CapacityExceeded):
        p.post_allocations({a: w({rp: {"VCPU": 6}}), b: w({rp: {"VCPU": 5}})})
    p.post_allocations({a: w({rp: {"VCPU": 6}}), b: w({rp: {"VCPU": 4}})})


def test_a_consumers_old_allocations_do_not_count_against_its_new_ones():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8)})
    c = claim(p, rp, VCPU=6)
    rewrite(p, c, {rp: {"VCPU": 8}})
    assert p.get_usages(rp) == {"VCPU": 8}


def test_class_without_inventory_on_the_provider_is_a_capacity_conflict():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8)})
    with pytest.raises(errors.CapacityExceeded):
        claim(p, rp, VCPU=1, DISK_GB=1)


# ------------------------------------------------------ over-capacity rules
def test_lowering_total_below_usage_is_accepted():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8)})
    claim(p, rp, VCPU=8)
    assert p.set_inventories(rp, gen(p, rp), {"VCPU": Inventory(4)}) == 3
    assert p.get_usages(rp) == {"VCPU": 8}


def test_over_capacity_tolerates_writes_that_do_not_raise_usage():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8)})
    a, b = claim(p, rp, VCPU=4), claim(p, rp, VCPU=4)
    p.set_inventories(rp, gen(p, rp), {"VCPU": Inventory(4)})   # 8 of 4
    rewrite(p, a, {rp: {"VCPU": 3}})                             # 7: better
    with pytest.raises(errors.CapacityExceeded):
        rewrite(p, a, {rp: {"VCPU": 4}})                         # 8 > 7
    rewrite(p, b, {rp: {"VCPU": 4}})                             # 7: the same
    with pytest.raises(errors.CapacityExceeded):
        claim(p, rp, VCPU=1)                                     # 8 > 7
    # the sum over all consumers of a POST counts: 2 + 4 + 1 == 7 is fine,
    # 1 + 4 + 3 == 8 is not
    c = new_uuid()
    with pytest.raises(errors.CapacityExceeded):
        p.post_allocations({a: w({rp: {"VCPU": 1}}, p.get_consumer(a).generation),
                            c: w({rp: {"VCPU": 3}})})
    p.post_allocations({a: w({rp: {"VCPU": 2}}, p.get_consumer(a).generation),
                        c: w({rp: {"VCPU": 1}})})
    assert p.get_usages(rp) == {"VCPU": 7}
    # a move keeps the usage the same, so it is accepted while over
    mig = new_uuid()
    old = p.get_consumer(b)
    p.post_allocations({b: w({}, old.generation),
                        mig: w(old.allocations, None, "MIGRATION")})
    assert p.get_usages(rp) == {"VCPU": 7}


def test_back_under_capacity_the_normal_rule_applies():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8)})
    a = claim(p, rp, VCPU=8)
    p.set_inventories(rp, gen(p, rp), {"VCPU": Inventory(4)})
    rewrite(p, a, {rp: {"VCPU": 2}})
    rewrite(p, a, {rp: {"VCPU": 4}})        # up again, but within capacity
    with pytest.raises(errors.CapacityExceeded):
        rewrite(p, a, {rp: {"VCPU": 5}})


def test_removing_a_class_in_use_is_refused():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8), "DISK_GB": Inventory(10)})
    c = claim(p, rp, VCPU=1)
    with pytest.raises(errors.InUse) as info:
        p.set_inventories(rp, gen(p, rp), {"DISK_GB": Inventory(10)})
    assert info.value.code == errors.INVENTORY_INUSE
    p.set_inventories(rp, gen(p, rp), {"VCPU": Inventory(8)})   # DISK_GB unused
    p.delete_allocations(c)
    p.set_inventories(rp, gen(p, rp), {})


# ------------------------------------------------------------ POST atomicity
def test_post_is_all_or_nothing():
    p = EmbeddedPlacement()
    rp1 = provider(p, {"VCPU": Inventory(8)})
    rp2 = provider(p, {"VCPU": Inventory(2)})
    inst = claim(p, rp1, VCPU=4)
    gens = (gen(p, rp1), gen(p, rp2), p.get_consumer(inst).generation)
    mig = new_uuid()
    with pytest.raises(errors.CapacityExceeded):
        p.post_allocations({inst: w({rp2: {"VCPU": 4}}, gens[2]),
                            mig: w({rp1: {"VCPU": 4}}, None, "MIGRATION")})
    assert (gen(p, rp1), gen(p, rp2), p.get_consumer(inst).generation) == gens
    assert p.get_consumer(inst).allocations == {rp1: {"VCPU": 4}}
    assert p.get_usages(rp1) == {"VCPU": 4} and p.get_usages(rp2) == {"VCPU": 0}
    # the migration consumer created for the failed write is gone again
    p.put_allocations(mig, w({rp1: {"VCPU": 1}}, None))


def test_post_generation_conflict_on_second_consumer_changes_nothing():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8)})
    inst = claim(p, rp, VCPU=4)
    new, busy = new_uuid(), claim(p, rp, VCPU=1)
    with pytest.raises(errors.ConcurrentUpdate) as info:
        p.post_allocations({new: w({rp: {"VCPU": 1}}),
                            busy: w({rp: {"VCPU": 2}}, None)})
    assert "consumer generation conflict" in str(info.value)
    assert p.get_usages(rp) == {"VCPU": 5}
    p.put_allocations(new, w({rp: {"VCPU": 1}}, None))   # no record left
    assert p.get_consumer(inst).generation == 1


def test_nova_move_allocations():
    p = EmbeddedPlacement()
    src = provider(p, {"VCPU": Inventory(8), "MEMORY_MB": Inventory(4096)})
    inst = claim(p, src, VCPU=2, MEMORY_MB=1024)
    before = p.get_consumer(inst)
    mig = new_uuid()
    p.post_allocations({inst: w({}, before.generation),
                        mig: w(before.allocations, None, "MIGRATION")})
    assert p.get_consumer(inst).allocations == {}
    moved = p.get_consumer(mig)
    assert moved.allocations == before.allocations
    assert (moved.generation, moved.consumer_type) == (1, "MIGRATION")
    assert p.get_usages(src) == {"VCPU": 2, "MEMORY_MB": 1024}


# --------------------------------------------------------------- generations
def test_provider_generation_rules():
    p = EmbeddedPlacement()
    p.create_trait("CUSTOM_T")
    rp = provider(p, {"VCPU": Inventory(8)})
    assert gen(p, rp) == 1
    assert p.set_traits(rp, 1, ["CUSTOM_T"]) == 2
    assert p.set_traits(rp, 2, ["CUSTOM_T"]) == 2     # unchanged: no bump
    assert p.set_aggregates(rp, 2, []) == 3           # always bumps
    assert p.set_inventories(rp, 3, {"VCPU": Inventory(8)}) == 4   # always
    with pytest.raises(errors.ConcurrentUpdate):
        p.set_traits(rp, 3, ["CUSTOM_T"])             # stale, even unchanged
    c = claim(p, rp, VCPU=1)
    assert gen(p, rp) == 5                            # allocation write bumps
    p.delete_allocations(c)
    assert gen(p, rp) == 5                            # DELETE does not


def test_rewrite_bumps_only_the_providers_it_names():
    """A consumer moved from rp1 to rp2 with one PUT: placement bumps rp2
    (named by the new rows) but not rp1, although rp1's usage dropped."""
    p = EmbeddedPlacement()
    rp1, rp2 = provider(p, {"VCPU": Inventory(8)}), provider(p, {"VCPU": Inventory(8)})
    c = claim(p, rp1, VCPU=2)
    g1, g2 = gen(p, rp1), gen(p, rp2)
    rewrite(p, c, {rp2: {"VCPU": 2}})
    assert (gen(p, rp1), gen(p, rp2)) == (g1, g2 + 1)
    # emptying a consumer bumps the providers it held
    rewrite(p, c, {})
    assert (gen(p, rp1), gen(p, rp2)) == (g1, g2 + 2)


def test_consumer_generation_rules():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8)})
    c = claim(p, rp, VCPU=1)
    assert p.get_consumer(c).generation == 1
    rewrite(p, c, {rp: {"VCPU": 2}})
    assert p.get_consumer(c).generation == 2
    for bad in (None, 1, 3):
        with pytest.raises(errors.ConcurrentUpdate) as info:
            p.put_allocations(c, w({rp: {"VCPU": 3}}, bad))
        assert info.value.code == errors.CONCURRENT_UPDATE
    with pytest.raises(errors.ConcurrentUpdate):
        p.put_allocations(new_uuid(), w({rp: {"VCPU": 1}}, 0))


# ---------------------------------------------------------- consumer records
def test_emptying_a_consumer_deletes_it():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8)})
    c = claim(p, rp, VCPU=1)
    rewrite(p, c, {})
    assert p.get_consumer(c).allocations == {}
    assert p.get_consumer(c).generation is None
    assert p.get_usages(rp) == {"VCPU": 0}
    with pytest.raises(errors.ConcurrentUpdate):
        p.put_allocations(c, w({rp: {"VCPU": 1}}, 2))
    p.put_allocations(c, w({rp: {"VCPU": 1}}, None))   # a new consumer again
    assert p.get_consumer(c).generation == 1


def test_delete_allocations_deletes_the_consumer():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8)})
    c = claim(p, rp, VCPU=1)
    p.delete_allocations(c)
    with pytest.raises(errors.NotFound):
        p.delete_allocations(c)
    p.put_allocations(c, w({rp: {"VCPU": 1}}, None))


def test_empty_write_for_an_unknown_consumer_leaves_a_record():
    """placement creates the consumer before it looks at the allocations
    and writes no rows for ``{}``, so the record stays at generation 0."""
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8)})
    c = new_uuid()
    p.put_allocations(c, w({}))
    assert p.get_consumer(c).generation is None
    with pytest.raises(errors.NotFound):
        p.delete_allocations(c)
    with pytest.raises(errors.ConcurrentUpdate):
        p.put_allocations(c, w({rp: {"VCPU": 1}}, None))
    p.put_allocations(c, w({rp: {"VCPU": 1}}, 0))
    assert p.get_consumer(c).generation == 1


# ------------------------------------------------------------------ providers
def test_sharing_provider_is_an_ordinary_provider_for_writes():
    p = EmbeddedPlacement()
    agg = new_uuid()
    cn1, cn2 = provider(p, {"VCPU": Inventory(8)}), provider(p, {"VCPU": Inventory(8)})
    ss = provider(p, {"DISK_GB": Inventory(100, reserved=10, allocation_ratio=1.1,
                                           step_size=10, min_unit=10)})
    p.set_traits(ss, 1, [SHARES])
    for rp in (cn1, cn2, ss):
        p.set_aggregates(rp, gen(p, rp), [agg])
    a, b = new_uuid(), new_uuid()
    p.put_allocations(a, w({cn1: {"VCPU": 2}, ss: {"DISK_GB": 50}}))
    p.put_allocations(b, w({cn2: {"VCPU": 2}, ss: {"DISK_GB": 40}}))
    assert p.get_usages(ss) == {"DISK_GB": 90}
    assert p.get_provider_allocations(ss) == {a: {"DISK_GB": 50}, b: {"DISK_GB": 40}}
    with pytest.raises(errors.CapacityExceeded):   # capacity 99.0
        p.put_allocations(new_uuid(), w({cn1: {"VCPU": 1}, ss: {"DISK_GB": 10}}))
    with pytest.raises(errors.CapacityExceeded):   # off the step grid
        rewrite(p, a, {cn1: {"VCPU": 2}, ss: {"DISK_GB": 45}})
    g = gen(p, ss)
    rewrite(p, a, {cn1: {"VCPU": 2}, ss: {"DISK_GB": 40}})
    assert gen(p, ss) == g + 1
    with pytest.raises(errors.InUse) as info:
        p.delete_provider(ss)
    assert info.value.code == errors.PROVIDER_IN_USE


def test_delete_provider_checks_children_before_allocations():
    p = EmbeddedPlacement()
    root = provider(p, {"VCPU": Inventory(8)})
    child = provider(p, {"VGPU": Inventory(2)}, parent=root)
    assert p.get_provider(child).root_provider_uuid == root
    c = claim(p, root, VCPU=1)
    with pytest.raises(errors.Conflict) as info:
        p.delete_provider(root)
    assert info.value.code == errors.PROVIDER_CANNOT_DELETE_PARENT
    p.delete_provider(child)
    with pytest.raises(errors.InUse):
        p.delete_provider(root)
    p.delete_allocations(c)
    p.delete_provider(root)
    with pytest.raises(errors.NotFound):
        p.get_provider(root)


def test_unknown_provider_is_404_without_a_code():
    p = EmbeddedPlacement()
    rp = new_uuid()
    for call in (lambda: p.get_provider(rp), lambda: p.get_usages(rp),
                 lambda: p.set_inventories(rp, 0, {}),
                 lambda: p.delete_provider(rp)):
        with pytest.raises(errors.NotFound) as info:
            call()
        assert info.value.code == errors.UNDEFINED_CODE


def test_write_naming_unknown_provider_is_400():
    p = EmbeddedPlacement()
    rp = provider(p, {"VCPU": Inventory(8)})
    claim(p, rp, VCPU=1)
    with pytest.raises(errors.InvalidRequest):
        p.put_allocations(new_uuid(), w({rp: {"VCPU": 1}, new_uuid(): {"VCPU": 1}}))
    assert p.get_usages(rp) == {"VCPU": 1}


# ----------------------------------------------------------- property test
N_PROVIDERS, N_CONSUMERS = 3, 5
amounts = st.integers(min_value=1, max_value=12)
resources = st.dictionaries(st.sampled_from(["VCPU", "MEMORY_MB"]), amounts,
                            min_size=1, max_size=2)
allocs_st = st.dictionaries(st.integers(0, N_PROVIDERS - 1), resources,
                            max_size=2)
gen_st = st.sampled_from(["read", "read", "read", "read", "null", "wrong"])
inventory_st = st.builds(
    lambda total, reserved, ratio, step: Inventory(
        total, min(reserved, total), 1, 16, step, ratio),
    st.integers(1, 12), st.integers(0, 3),
    st.sampled_from([1.0, 0.57, 1.5, 0.9, 2.0]), st.sampled_from([1, 1, 2]))
op_st = st.one_of(
    st.tuples(st.just("put"), st.integers(0, N_CONSUMERS - 1), allocs_st, gen_st),
    st.tuples(st.just("post"), st.lists(
        st.tuples(st.integers(0, N_CONSUMERS - 1), allocs_st, gen_st),
        min_size=1, max_size=3, unique_by=lambda t: t[0])),
    st.tuples(st.just("move"), st.integers(0, N_CONSUMERS - 1),
              st.integers(0, N_CONSUMERS - 1)),
    st.tuples(st.just("delete"), st.integers(0, N_CONSUMERS - 1)),
    st.tuples(st.just("resize"), st.integers(0, N_CONSUMERS - 1),
              st.integers(-2, 1)),
    st.tuples(st.just("inventory"), st.integers(0, N_PROVIDERS - 1),
              st.sampled_from(["VCPU", "MEMORY_MB"]), inventory_st),
    st.tuples(st.just("inventories"), st.integers(0, N_PROVIDERS - 1),
              st.dictionaries(st.sampled_from(["VCPU", "MEMORY_MB"]),
                              inventory_st, min_size=0, max_size=2)),
)


def _observe(p, rps, consumers):
    """(usage per (rp, rc), capacity per (rp, rc), sum of consumers'
    allocations per (rp, rc), everything observable)."""
    usage, cap, summed, seen = {}, {}, {}, []
    for rp in rps:
        g, invs = p.get_inventories(rp)
        u = p.get_usages(rp)
        assert set(u) == set(invs)
        for rc, inv in invs.items():
            usage[(rp, rc)], cap[(rp, rc)] = u[rc], inv.capacity
        per_rp = p.get_provider_allocations(rp)
        for c, res in per_rp.items():
            assert p.get_consumer(c).allocations[rp] == res
        seen.append((g, invs, u, per_rp))
    for c in consumers:
        ca = p.get_consumer(c)
        seen.append(ca)
        assert (ca.generation is None) == (not ca.allocations)
        for rp, res in ca.allocations.items():
            for rc, n in res.items():
                assert n >= 1
                summed[(rp, rc)] = summed.get((rp, rc), 0) + n
    snap = {rec.provider.uuid: rec.usages for rec in p.snapshot().providers}
    for (rp, rc), n in usage.items():
        assert snap[rp][rc] == n
    return usage, cap, summed, seen


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op_st, min_size=1, max_size=25))
def test_usage_is_the_sum_of_allocations_and_capacity_holds(ops):
    p = EmbeddedPlacement()
    rps = [provider(p, {"VCPU": Inventory(16, 0, 1, 16, 1, 1.0),
                        "MEMORY_MB": Inventory(16, 0, 1, 16, 1, 1.0)})
           for _ in range(N_PROVIDERS)]
    consumers = [new_uuid() for _ in range(N_CONSUMERS)]
    # (rp, rc) -> the usage an inventory change left above capacity
    ceiling: dict[tuple[str, str], int] = {}

    def holds(c):
        return bool(p.get_consumer(c).allocations)

    def generation(c, how):
        g = p.get_consumer(c).generation
        return {"read": g, "null": None, "wrong": (g or 0) + 1}[how]

    usage, cap, summed, seen = _observe(p, rps, consumers)
    for op in ops:
        kind = op[0]
        inventory_change = False
        try:
            if kind == "put":
                _, ci, allocs, how = op
                if not allocs and not holds(consumers[ci]):
                    continue    # would leave a record at generation 0
                p.put_allocations(consumers[ci], w(
                    {rps[i]: res for i, res in allocs.items()},
                    generation(consumers[ci], how)))
            elif kind == "post":
                writes = {
                    consumers[ci]: w({rps[i]: res for i, res in allocs.items()},
                                     generation(consumers[ci], how))
                    for ci, allocs, how in op[1]
                    if allocs or holds(consumers[ci])}
                if not writes:
                    continue
                p.post_allocations(writes)
            elif kind == "move":
                src, dst = consumers[op[1]], consumers[op[2]]
                if src == dst or not holds(src):
                    continue
                old = p.get_consumer(src)
                p.post_allocations({
                    src: w({}, old.generation),
                    dst: w(old.allocations, p.get_consumer(dst).generation,
                           "MIGRATION")})
            elif kind == "delete":
                p.delete_allocations(consumers[op[1]])
            elif kind == "resize":   # every amount of a consumer +- a few
                _, ci, delta = op
                old = p.get_consumer(consumers[ci])
                if not old.allocations:
                    continue
                p.put_allocations(consumers[ci], w(
                    {rp: {rc: max(1, n + delta) for rc, n in res.items()}
                     for rp, res in old.allocations.items()}, old.generation))
            elif kind == "inventory":    # change one class, keep the rest
                _, i, rc, inv = op
                inventory_change = True
                g, invs = p.get_inventories(rps[i])
                p.set_inventories(rps[i], g, dict(invs, **{rc: inv}))
            else:                          # replace all (may remove classes)
                _, i, invs = op
                inventory_change = True
                p.set_inventories(rps[i], p.get_provider(rps[i]).generation, invs)
        except errors.PlacementError:
            after = _observe(p, rps, consumers)
            assert after[3] == seen, f"refused {op} changed state"
            continue
        before_usage = usage
        usage, cap, summed, seen = _observe(p, rps, consumers)
        # usage is the sum of what the consumers hold
        assert {k: v for k, v in usage.items() if v} == summed
        for key, used in usage.items():
            if inventory_change:
                if used > cap[key]:
                    ceiling[key] = used
                else:
                    ceiling.pop(key, None)
                continue
            # an allocation write never takes a class over capacity, and
            # never raises the usage of one that is over
            if used > cap[key]:
                assert key in ceiling, f"{op} took {key} over capacity"
                assert used <= before_usage.get(key, 0) <= ceiling[key]
                ceiling[key] = used
            else:
                ceiling.pop(key, None)
