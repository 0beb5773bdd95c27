"""The embedded placement's change feed and per-provider holders, and the
fleet view that refreshes from the feed."""

import pytest

from scheduler_ext import driver as se_driver
from scheduler_ext import errors
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.change_log import ChangeLog
from scheduler_ext.placement.client import ChangeFeed
from scheduler_ext.sources.fleet_view import FleetView

C1 = "11111111-1111-4111-8111-111111111111"
C2 = "22222222-2222-4222-8222-222222222222"


def _host(p, name):
    prov = p.create_provider(name)
    p.set_inventories(prov.uuid, prov.generation, {"VCPU": Inventory(8)})
    return prov.uuid


def _claim(p, consumer, rp, n, gen=None):
    p.put_allocations(consumer, AllocationWrite({rp: {"VCPU": n}}, "p", "u", gen))


def test_feed_names_what_each_call_changed():
    p = EmbeddedPlacement()
    assert isinstance(p, ChangeFeed)
    start = p.change_position()
    a, b = _host(p, "a"), _host(p, "b")
    mid = p.change_position()
    assert p.changes_since(start).providers == (a, b)
    _claim(p, C1, a, 2)
    changes = p.changes_since(mid)
    assert changes.providers == (a,) and changes.consumers == (C1,)
    mid = changes.position
    # a move: C1's allocations leave a (usage decreases, no generation bump)
    _claim(p, C1, b, 2, gen=p.get_consumer(C1).generation)
    changes = p.changes_since(mid)
    assert set(changes.providers) == {a, b} and changes.consumers == (C1,)
    mid = changes.position
    p.delete_allocations(C1)
    assert p.changes_since(mid).providers == (b,)
    assert p.changes_since(p.change_position()).providers == ()


def test_refused_write_changes_nothing_in_the_feed():
    p = EmbeddedPlacement()
    a = _host(p, "a")
    pos = p.change_position()
    with pytest.raises(errors.CapacityExceeded):
        _claim(p, C1, a, 9)
    with pytest.raises(errors.InvalidRequest):
        _claim(p, "not-a-uuid", a, 1)
    assert p.changes_since(pos).providers == ()
    assert p.change_position() == pos


def test_a_reader_left_behind_is_told_to_reread_everything():
    log = ChangeLog(limit=4)
    for i in range(6):
        log.provider(f"p{i}")
    assert log.since(0).providers is None
    assert log.since(log.position - 1).providers == ("p5",)


def test_provider_allocations_come_from_the_holders_index():
    p = EmbeddedPlacement()
    a, b = _host(p, "a"), _host(p, "b")
    _claim(p, C1, a, 1)
    _claim(p, C2, a, 2)
    assert p.get_provider_allocations(a) == {C1: {"VCPU": 1}, C2: {"VCPU": 2}}
    _claim(p, C1, b, 1, gen=p.get_consumer(C1).generation)
    assert p.get_provider_allocations(a) == {C2: {"VCPU": 2}}
    assert p.get_provider_allocations(b) == {C1: {"VCPU": 1}}
    with pytest.raises(errors.InUse):
        p.delete_provider(b)
    p.delete_allocations(C1)
    p.delete_provider(b)
    assert p.create_provider("b").name == "b"     # the name is free again


def test_embedded_answers_our_checks_as_placement_does():
    """Inside the twin, a refused input is placement's 400, not our
    InvalidInput."""
    p = EmbeddedPlacement()
    with pytest.raises(errors.InvalidRequest) as info:
        p.get_consumer("nope")
    assert type(info.value) is errors.InvalidRequest
    assert str(info.value).startswith("400 placement.undefined_code")


def test_fleet_view_refreshes_only_what_the_feed_names():
    p = EmbeddedPlacement()
    a, b = _host(p, "a"), _host(p, "b")
    view = FleetView(p, se_driver.make_conf())
    reads = []
    real = p.snapshot
    # the feed's reads: a snapshot of the providers it names
    p.snapshot = lambda uuids=None: reads.extend(uuids or ["all"]) or real(uuids)
    _claim(p, C1, a, 3)
    view.refresh()
    assert reads == [a]
    assert view.index.usage(a)["VCPU"] == 3 and view.index.usage(b)["VCPU"] == 0
    p.delete_allocations(C1)      # a decrease: no generation bump
    view.refresh()
    assert view.index.usage(a)["VCPU"] == 0
    c = _host(p, "c")
    view.refresh()
    assert c in view.index.row_of
