"""Faults between scheduler-ext and a real placement (issue: placement down
at start, dying mid-run, a 500 on a write, a 409 storm, a provider deleted
under a cached snapshot): a clear error or a retry that succeeds, and never
a lost allocation."""

import pytest

from scheduler_ext import errors
from scheduler_ext.lab import invariants
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.moves.reconcile import Reconciler
from tests.functional.faultproxy import FaultProxy
from tests.unit.helpers import FLAVOR1, FLAVOR2, MAX12, dump, small_host, start


@pytest.fixture
def proxied(real_client, private_placement_url):
    """(client through a fault proxy, the proxy, the direct client)."""
    proxy = FaultProxy(private_placement_url)
    with proxy as url:
        yield HttpPlacement.from_url(url), proxy, real_client


def _settled(direct, model):
    fixes = Reconciler(direct).run(model.states(), apply=True)
    assert all(f.applied for f in fixes), [f.error for f in fixes]
    assert invariants.check_providers(direct) == []
    assert invariants.check_servers(direct, model.states(), exact=True) == []


def test_placement_down_at_start_is_a_clear_error():
    client = HttpPlacement.from_url("http://127.0.0.1:9")
    with pytest.raises(errors.PlacementUnavailable, match="placement unreachable"):
        start(client)


def test_placement_dying_mid_run_then_back(proxied):
    client, proxy, direct = proxied
    host = small_host(direct)
    _, model = start(client)
    server = model.boot(FLAVOR1)
    before = dump(direct)
    proxy.down = True
    with pytest.raises(errors.PlacementUnavailable, match="unreachable"):
        model.resize(server.uuid, FLAVOR2)
    assert dump(direct) == before
    proxy.down = False
    move = model.resize(server.uuid, FLAVOR2)
    assert move.dest == host
    model.confirm(server.uuid)
    _settled(direct, model)


@pytest.mark.parametrize("forward", [False, True])
def test_500_on_the_claim(proxied, forward):
    """A 500 before the write: nothing written. A 500 after it (placement
    wrote, the answer was lost): reconcile settles it."""
    client, proxy, direct = proxied
    host = small_host(direct)
    _, model = start(client)
    server = model.boot(FLAVOR1)
    # the conductor's swap (the first POST) goes through; the claim gets it
    proxy.fail("POST", "/allocations", 500, count=1, forward=forward, after=1)
    with pytest.raises(errors.PlacementUnavailable, match="500"):
        model.resize(server.uuid, FLAVOR2)
    assert proxy.hits == 1
    held = direct.get_consumer(server.uuid).allocations
    assert held == ({host: MAX12} if forward else {})
    _settled(direct, model)
    assert direct.get_consumer(server.uuid).allocations == {host: FLAVOR1}


def test_409_storm_is_retried_then_succeeds(proxied):
    client, proxy, direct = proxied
    host = small_host(direct)
    _, model = start(client)
    proxy.fail("PUT", "/allocations", 409, code="placement.concurrent_update",
               detail="Inventory and/or allocations changed", count=2)
    proxy.fail("POST", "/allocations", 409, code="placement.concurrent_update",
               detail="Inventory and/or allocations changed", count=2)
    server = model.boot(FLAVOR1)
    assert server.host == host and proxy.hits == 2
    assert direct.get_consumer(server.uuid).allocations == {host: FLAVOR1}


def test_409_storm_longer_than_the_retries_leaves_nothing(proxied):
    client, proxy, direct = proxied
    small_host(direct)
    _, model = start(client)
    proxy.fail("POST", "/allocations", 409, code="placement.concurrent_update",
               detail="Inventory and/or allocations changed", count=100)
    before = dump(direct)
    with pytest.raises(errors.NoValidHost, match="every claim failed"):
        model.boot(FLAVOR1)
    assert dump(direct) == before


def test_consumer_generation_conflict_retried_only_after_a_reread(proxied):
    """A consumer-generation 409 is retried on the same host only after the
    consumers were re-read and found unchanged, and at most
    max_claim_attempts times; then nothing is left written."""
    client, proxy, direct = proxied
    small_host(direct)
    _, model = start(client)
    proxy.fail("POST", "/allocations", 409, code="placement.concurrent_update",
               detail="consumer generation conflict - expected 1 but got null",
               count=100)
    before = dump(direct)
    with pytest.raises(errors.NoValidHost, match="every claim failed"):
        model.boot(FLAVOR1)
    assert proxy.hits == 3       # max_claim_attempts (default 3)
    assert dump(direct) == before


def test_provider_deleted_under_a_cached_snapshot(real_client):
    host1 = small_host(real_client, "host1")
    host2 = small_host(real_client, "host2")
    drv, model = start(real_client)          # the index knows both hosts
    real_client.delete_provider(host1)
    server = model.boot(FLAVOR1)
    assert server.host == host2
    assert invariants.check_providers(real_client) == []
