"""Every move flow ends where stock nova ends (scheduler_ext.lab.move_oracle).

Generated flows (hypothesis: a failure shrinks to a minimal flow) run with
stock and with ours on the embedded placement (with placement's candidates
from the reference, so the placement source runs too); every difference must be
one KNOWN_OPEN explains, and each known family is pinned by a minimal
flow that fails once it is fixed (then drop the entry); so is each of
nova's own double holds (STOCK_BREAKS), where ours ends as stock. ORACLE_FLOWS sets
the number of generated flows (default 300); the long sweeps are
``python -m scheduler_ext.lab.move_oracle_sweep`` (doc/source/testing.rst).
"""

import collections
import logging
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_ext.lab import move_oracle as mo
from scheduler_ext.lab import move_oracle_sweep
from scheduler_ext.lab.move_fleet import Shape
from scheduler_ext.lab.move_run import OURS, run_flow
from scheduler_ext.lab.reference_placement import ReferencePlacement

FLOWS = int(os.environ.get("ORACLE_FLOWS", "300"))
ENGINES = ("numpy", "placement")
SEEN: collections.Counter = collections.Counter()


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


@settings(max_examples=FLOWS, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_every_flow_ends_where_stock_ends(data):
    flow = mo.draw_flow(lambda name, options: data.draw(
        st.sampled_from(list(options)), label=name), ENGINES)
    diffs, stock, ours = mo.compare(flow, ReferencePlacement)
    fam = mo.family(stock, ours, diffs)
    SEEN[fam or "same"] += 1
    assert fam != "NEW", f"{flow}: " + "; ".join(map(str, diffs))


def test_generated_flows_reach_every_kind_of_end():
    """The property above ran over flows of every move and restart point
    (a vacuous run would pass it)."""
    counts: collections.Counter = collections.Counter()
    import random
    rng = random.Random(5)
    for _ in range(400):
        flow = mo.random_flow(rng, ENGINES)
        counts[flow.move] += 1
        counts["kill " + flow.kill_point] += 1
        counts["prep"] += bool(flow.prep_failures)
        counts["stranded"] += flow.stranded is not None
    assert all(counts[m] for m in mo.MOVES)
    assert all(counts["kill " + k] for k in mo.KILL_POINTS
               if k not in mo.RECONCILE_KILL_POINTS)
    # the reconcile dies at each of its first three writes
    assert all(counts[f"kill {k} {n}"] for k in mo.RECONCILE_KILL_POINTS
               for n in (1, 2, 3))
    assert counts["prep"] > 50
    assert counts["stranded"] > 20


def _flow(shape, vcpus, servers, new, **kw):
    return mo.Flow(shape, vcpus, servers, 0, "resize", new, **kw)


def test_bug_1790204_resize_in_place_holds_the_new_flavor():
    """Stock finds no host; ours resizes in place: the expected state is
    the new flavor on the source, and ours ends there."""
    flow = _flow(Shape(hosts=1), (2,), (mo.ServerSpec(1, 10),), mo.ServerSpec(2, 10))
    diffs, stock, ours = mo.compare(flow, ReferencePlacement)
    assert stock.move_result == "NoValidHost" and ours.move_result == "ok"
    assert ours.consumers["s0"] == {"h0": {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}}
    assert diffs == []


def test_same_host_verify_resize_holds_max_of_old_and_new_per_provider():
    """During VERIFY_RESIZE on the same host the server holds max(old, new)
    per provider and class, its port's bandwidth once."""
    flow = _flow(Shape(hosts=1, sharing=1, local_disk=False, qos=True), (4,),
                 (mo.ServerSpec(2, 20, port=True),), mo.ServerSpec(1, 40, port=True),
                 end="revert")
    diffs, _, ours = mo.compare(flow, ReferencePlacement)
    assert ours.same_host and ours.verify == [] and diffs == []


#: one minimal flow per KNOWN_OPEN family, with its exact differences
KNOWN_OPEN_FLOWS = {
    # no finding: the over-hold window of a failed same-host resize seen
    # by the next boot before the reconcile
    "window": (_flow(Shape(hosts=1), (2,), (mo.ServerSpec(1, 10),),
                     mo.ServerSpec(2, 10), kill="after_claim"),
               ["usage h0 DISK_GB: expected 20, got 10",
                "usage h0 MEMORY_MB: expected 2048, got 1024",
                "usage h0 VCPU: expected 2, got 1",
                "s1 h0 DISK_GB: expected 10, got 0",
                "s1 h0 MEMORY_MB: expected 1024, got 0",
                "s1 h0 VCPU: expected 1, got 0"]),
}

#: one minimal flow per STOCK_BREAKS entry, with stock's own held-once
#: breaks (ours' end state is the same: no difference)
STOCK_BREAKS_FLOWS = {
    "evacuate-shared-disk": (mo.Flow(Shape(hosts=2, sharing=2, local_disk=False), (4, 4),
                                     (mo.ServerSpec(1, 10),), 0, "evacuate",
                                     mo.ServerSpec(1, 10)),
                             ["held s0 DISK_GB: expected 10, got 20"]),
    "revert-fails-device": (_flow(Shape(hosts=1, pci=True), (4,),
                                  (mo.ServerSpec(1, 10, pci=True),),
                                  mo.ServerSpec(1, 10, pci=True), end="revert_fails"),
                            ["held s0 CUSTOM_PCI_ORACLE_DEV: expected 1, got 2",
                             "held s0 DISK_GB: expected 10, got 20",
                             "held s0 MEMORY_MB: expected 1024, got 2048",
                             "held s0 VCPU: expected 1, got 2"]),
}


@pytest.mark.parametrize("name", sorted(STOCK_BREAKS_FLOWS))
def test_stock_own_double_hold_is_ours_too_and_no_difference(name):
    """nova leaves the server holding twice (stock's end state breaks the
    held-once rule); ours ends exactly as stock: no difference, named by
    ``stock_breaks``. Fails if stock stops breaking it (remove the entry)
    or if ours ends otherwise."""
    flow, breaks = STOCK_BREAKS_FLOWS[name]
    diffs, stock, ours = mo.compare(flow, ReferencePlacement)
    assert sorted(map(str, stock.held)) == sorted(breaks)
    assert sorted(map(str, ours.held)) == sorted(breaks)
    assert diffs == [] and mo.stock_breaks(stock, ours) == name


def test_every_stock_break_is_pinned():
    assert set(STOCK_BREAKS_FLOWS) == set(mo.STOCK_BREAKS)


#: a same-host resize with two sharing providers: stock claims the new
#: disk on the freer one, a provider the disk is not on; ours keeps it on
#: the one holding the disk (the same-host candidate is pinned)
SHARED_DISK_SAME_HOST = _flow(Shape(hosts=1, sharing=2, local_disk=False), (8,),
                              (mo.ServerSpec(2, 20),), mo.ServerSpec(4, 40),
                              engine="placement")


def _assert_disk_kept_where_it_is(new_client):
    diffs, stock, ours = mo.compare(SHARED_DISK_SAME_HOST, new_client)
    disk = [p for p, r in ours.mover_before.items() if r.get("DISK_GB")]
    assert len(disk) == 1
    assert {p for p, r in ours.consumers["s0"].items() if r.get("DISK_GB")} == set(disk)
    assert {p for p, r in stock.consumers["s0"].items() if r.get("DISK_GB")} != set(disk)
    assert diffs == []


def test_same_host_resize_keeps_the_disk_on_its_sharing_provider_where_stock_moves_it():
    """The oracle's expected state pins the same host's classes to the
    providers that held them (the same-host fix itself): stock's own end
    state holds the disk on the other sharing provider."""
    _assert_disk_kept_where_it_is(ReferencePlacement)


def test_same_host_resize_keeps_the_disk_on_its_sharing_provider_on_real_placement(
        real_client):
    _assert_disk_kept_where_it_is(lambda: move_oracle_sweep.empty(real_client))


#: a cold migration to another host of the aggregate with two sharing
#: providers, with engine = placement: the other host's candidate is
#: weighed with the old disk held, as stock weighs it, so ours takes the
#: sharing provider stock takes (it took the released one before)
COLD_MIGRATION_TWO_SHARING = mo.Flow(
    Shape(hosts=3, sharing=2, local_disk=True, qos=True), (8, 2, 8),
    (mo.ServerSpec(1, 20, port=True),), 0, "migrate", mo.ServerSpec(1, 20, port=True),
    failure="finish_resize", end="revert", engine="placement")


def test_placement_source_weighs_other_hosts_with_the_old_allocations_held():
    diffs, stock, ours = mo.compare(COLD_MIGRATION_TWO_SHARING, ReferencePlacement)
    assert ours.decisions[ours.move_call][0].allocations == \
        stock.decisions[stock.move_call][0].allocations
    assert diffs == []


#: the review's findings (issue 33) the oracle saw on 4cc6d1b, each by its
#: minimal flow: fixed on main, each ends where stock ends
FIXED_FLOWS = {
    # finding 3: ours picks the other host, prep_resize fails there, the
    # conductor reschedules onto the source (instance new + migration old,
    # each with the port): the port's bandwidth is held once
    "3": _flow(Shape(hosts=2, qos=True), (8, 8), (mo.ServerSpec(2, 10, port=True),),
               mo.ServerSpec(4, 10, port=True), prep_failures=1, source_last=True),
    # finding 8: the conductor dies after moving everything to the
    # migration; reconcile keeps the port on the NIC
    "8": _flow(Shape(hosts=1, qos=True), (4,), (mo.ServerSpec(2, 10, port=True),),
               mo.ServerSpec(2, 10, port=True), failure="conductor_dies"),
    # finding 5: a same-host vGPU resize claims the new vGPU beside the old
    "5": _flow(Shape(hosts=1, vgpu="granular"), (8,),
               (mo.ServerSpec(2, 10, vgpu=2),), mo.ServerSpec(2, 10, vgpu=1)),
    # finding 1: the same-host candidate of the placement source is pinned
    # (a flavor forbidding a trait: a query only placement answers)
    "1": _flow(Shape(hosts=1), (2,), (mo.ServerSpec(2, 20),), mo.ServerSpec(1, 20),
               forbid=True, engine="placement"),
    # finding 4: boot from volume, resized to a disk flavor on a host whose
    # disk is only shared: the placement source finds the source
    "4": _flow(Shape(hosts=1, sharing=1, local_disk=False), (8,),
               (mo.ServerSpec(2, 0),), mo.ServerSpec(4, 20), engine="placement"),
}


@pytest.mark.parametrize("finding", sorted(FIXED_FLOWS))
def test_fixed_finding_ends_where_stock_ends(finding):
    diffs, _, _ = mo.compare(FIXED_FLOWS[finding], ReferencePlacement)
    assert list(map(str, diffs)) == []


def test_qos_reschedule_onto_the_source_holds_the_port_once_after_confirm():
    """Finding 3: the NIC holds the port's bandwidth once, not twice."""
    diffs, stock, ours = mo.compare(FIXED_FLOWS["3"], ReferencePlacement)
    assert ours.same_host and stock.same_host
    assert ours.usages["h0-nic"] == {"NET_BW_EGR_KILOBIT_PER_SEC": 1000}
    assert ours.consumers["s0"]["h0-nic"] == {"NET_BW_EGR_KILOBIT_PER_SEC": 1000}
    assert diffs == []


def test_vgpu_same_host_resize_holds_the_new_vgpu_beside_the_old_like_stock():
    """Finding 5: during VERIFY_RESIZE the migration holds the old vGPUs,
    the instance the new one (no max(old, new) for a device); after
    confirm the server holds the new vGPU where stock holds it."""
    diffs, stock, ours = mo.compare(FIXED_FLOWS["5"], ReferencePlacement)
    assert ours.same_host and ours.verify == [] and diffs == []
    assert ours.consumers["s0"] == stock.consumers["s0"]
    assert allocations_vgpu(ours.consumers["s0"]) == 1


def allocations_vgpu(allocs):
    return sum(r.get("VGPU", 0) for r in allocs.values())


def _reconcile_dying_mid_pass(kill, write):
    """Two writes in the final pass: s0's cold migration lost its
    conductor (its migration holds everything), s1 was resized on its one
    host and confirmed (ours' instance still holds max(old, new))."""
    return mo.Flow(Shape(hosts=1), (8,), (mo.ServerSpec(1, 10), mo.ServerSpec(2, 20)),
                   1, "resize", mo.ServerSpec(1, 40), verify_reconcile=False,
                   kill=kill, reconcile_write=write, stranded=0)


@pytest.mark.parametrize("kill, write", [
    ("before_reconcile_write", 1), ("after_reconcile_write", 1),
    ("before_reconcile_write", 2)])
def test_reconcile_dying_mid_pass_ends_where_stock_ends_after_the_restarted_pass(
        kill, write):
    """The reconcile process dies right before or after one of its two
    writes; the restarted service's pass ends where stock ends. Without
    that pass the state differs (s1 still holds max(old, new)), so the
    restarted pass is what this pins."""
    flow = _reconcile_dying_mid_pass(kill, write)
    diffs, stock, ours = mo.compare(flow, ReferencePlacement)
    assert ours.killed == kill and not stock.killed
    assert list(map(str, diffs)) == []
    dead = run_flow(flow, OURS, ReferencePlacement(), restart=False)
    assert "s1 h0 VCPU: expected 1, got 2" in map(str, mo.differences(flow, stock, dead))


def test_bug_1790204_resize_in_place_where_stock_moves_the_server_away():
    """Stock cannot take the source (its claim counts the old flavor) and
    moves the server to the other host; ours resizes in place. The
    expected state is the new flavor on the source, as where stock finds
    no host: the same-host fix itself."""
    flow = mo.Flow(Shape(hosts=2), (4, 4), (mo.ServerSpec(4, 10), mo.ServerSpec(1, 10)),
                   0, "resize", mo.ServerSpec(2, 10))
    diffs, stock, ours = mo.compare(flow, ReferencePlacement)
    assert stock.move_result == "ok" and not stock.same_host
    assert stock.consumers["s0"] == {"h1": {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}}
    assert ours.same_host
    assert ours.consumers["s0"] == {"h0": {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}}
    assert diffs == []


#: nova bug 1790204 on a reschedule: ours chooses the source (the only
#: host of its old flavor's size once the old is released), stock cannot;
#: prep_resize then fails on the host ours chose
SOURCE_FIRST_THEN_PREP_FAILS = mo.Flow(
    Shape(hosts=3, sharing=0, local_disk=True, qos=True, pci=True), (2, 8, 4),
    (mo.ServerSpec(1, 20), mo.ServerSpec(4, 10)), 1, "resize",
    mo.ServerSpec(2, 0, pci=True), prep_failures=1, end="revert_fails",
    forbid=True)


def test_prep_resize_fails_on_the_hosts_ours_failed_on_in_the_stock_run():
    """prep_resize failing is a host's failure, replayed by host: ours
    failed on the source, which stock never chose, so stock's first choice
    holds and both end on the host ours rescheduled to (counted per
    attempt, stock failed on that host and the flows ended apart)."""
    diffs, stock, ours = mo.compare(SOURCE_FIRST_THEN_PREP_FAILS, ReferencePlacement)
    assert ours.failed_on == [ours.source] and stock.failed_on == []
    assert list(map(str, diffs)) == []


def _assert_still_there(family, new_client):
    flow, expected = KNOWN_OPEN_FLOWS[family]
    diffs, stock, ours = mo.compare(flow, new_client)
    assert sorted(map(str, diffs)) == sorted(expected)
    assert mo.family(stock, ours, diffs) == family


@pytest.mark.parametrize("family", sorted(KNOWN_OPEN_FLOWS))
def test_known_open_difference_is_still_there(family):
    """Fails once the over-hold window closes before the next boot: then
    remove its KNOWN_OPEN entry."""
    _assert_still_there(family, ReferencePlacement)


@pytest.mark.parametrize("finding", ["1", "4"])
def test_fixed_finding_on_real_placement_ends_where_stock_ends(real_client, finding):
    diffs, _, _ = mo.compare(FIXED_FLOWS[finding],
                             lambda: move_oracle_sweep.empty(real_client))
    assert list(map(str, diffs)) == []


def test_every_known_open_family_is_pinned():
    """Each KNOWN_OPEN family has its minimal flow."""
    assert set(KNOWN_OPEN_FLOWS) == set(mo.KNOWN_OPEN)
