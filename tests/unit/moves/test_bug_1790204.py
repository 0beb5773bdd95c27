"""nova bug 1790204: a resize on a full host to a flavor that only fits once
the old flavor is released.

nova's own regression test: one host (VCPU 2, MEMORY_MB 8192, DISK_GB 1028),
flavor1 1 vCPU / 2048 MB / 1028 GB resized to flavor2 2 vCPU / 2048 MB /
1028 GB with allow_resize_to_same_host.
"""

import pytest

from scheduler_ext import errors
from scheduler_ext.lab import invariants
from scheduler_ext.moves.reconcile import Reconciler
from tests.unit.helpers import FLAVOR1, FLAVOR2, MAX12, dump, small_host, start, usage


@pytest.fixture
def client():
    from scheduler_ext.placement.embedded import EmbeddedPlacement
    return EmbeddedPlacement()


def _resized(client):
    host = small_host(client)
    drv, model = start(client)
    server = model.boot(FLAVOR1)
    move = model.resize(server.uuid, FLAVOR2)
    return host, model, server, move


def test_stock_nova_gives_no_valid_host_and_keeps_flavor1(client):
    host = small_host(client)
    _, model = start(client, "stock")
    server = model.boot(FLAVOR1)
    before = dump(client)
    with pytest.raises(errors.NoValidHost, match="no host fits"):
        model.resize(server.uuid, FLAVOR2)
    # the conductor moved the allocations back: all as it was
    assert client.get_consumer(server.uuid).allocations == {host: FLAVOR1}
    assert dump(client)[0] == before[0]


def test_same_host_resize_succeeds_and_holds_max_while_awaiting_confirm(client):
    host, model, server, move = _resized(client)
    assert move.dest == host == move.source
    assert usage(client, host) == MAX12
    assert client.get_consumer(server.uuid).allocations == {host: MAX12}
    assert client.get_consumer(move.migration_uuid).allocations == {}
    assert invariants.check_providers(client) == []


def test_confirm_leaves_exactly_flavor2(client):
    host, model, server, move = _resized(client)
    model.confirm(server.uuid)
    Reconciler(client).run(model.states(), apply=True)
    assert client.get_consumer(server.uuid).allocations == {host: FLAVOR2}
    assert client.get_consumer(move.migration_uuid).allocations == {}
    assert invariants.check_servers(client, model.states(), exact=True) == []


def test_revert_and_reconcile_leave_exactly_flavor1(client):
    host, model, server, move = _resized(client)
    model.revert(server.uuid)
    # nova's revert found nothing on the migration and wrote nothing
    assert client.get_consumer(server.uuid).allocations == {host: MAX12}
    fixes = Reconciler(client).run(model.states(), apply=True)
    assert [f.applied for f in fixes] == [True]
    assert client.get_consumer(server.uuid).allocations == {host: FLAVOR1}
    assert client.get_consumer(move.migration_uuid).allocations == {}
    assert usage(client, host) == FLAVOR1
    assert invariants.check_servers(client, model.states(), exact=True) == []


def test_reconcile_is_dry_run_by_default(client):
    host, model, server, move = _resized(client)
    model.revert(server.uuid)
    fixes = Reconciler(client).run(model.states())
    assert len(fixes) == 1 and not fixes[0].applied
    assert client.get_consumer(server.uuid).allocations == {host: MAX12}


def test_reconcile_keeps_classes_no_flavor_names(client):
    """A port's bandwidth on the instance is not the flavor's: the trim
    after a same-host revert leaves it alone."""
    from scheduler_ext.lab.fleet import add_host
    from scheduler_ext.placement import Inventory
    host, model, server, move = _resized(client)
    nic = add_host(client, "nic", {"NET_BW_EGR_KILOBIT_PER_SEC": Inventory(10000)})
    current = client.get_consumer(server.uuid)
    client.put_allocations(server.uuid, current.write(
        {host: MAX12, nic: {"NET_BW_EGR_KILOBIT_PER_SEC": 1000}}))
    model.revert(server.uuid)
    fixes = Reconciler(client).run(model.states(), apply=True)
    assert [f.applied for f in fixes] == [True]
    assert client.get_consumer(server.uuid).allocations == {
        host: FLAVOR1, nic: {"NET_BW_EGR_KILOBIT_PER_SEC": 1000}}
    assert Reconciler(client).run(model.states()) == []
