"""nova bug 1784020: moves of a server whose DISK_GB lives on a sharing
provider (aggregate member with MISC_SHARES_VIA_AGGREGATE) must carry that
allocation through every step: nothing lost, nothing double-counted."""

import uuid

import pytest

from scheduler_ext.lab import invariants
from scheduler_ext.lab.fleet import add_host
from scheduler_ext.lab.nova_model import Server
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.moves.reconcile import Reconciler
from tests.unit.helpers import (FLAVOR1, FLAVOR2, shared_storage, small_host,
                              start, usage)

AGG = str(uuid.UUID(int=7))
CPU_MEM1 = {"VCPU": 1, "MEMORY_MB": 2048}
CPU_MEM2 = {"VCPU": 2, "MEMORY_MB": 2048}
DISK = {"DISK_GB": 1028}


@pytest.fixture
def client():
    return EmbeddedPlacement()


def _reconciled(client, model):
    Reconciler(client).run(model.states(), apply=True)
    assert invariants.check_providers(client) == []
    assert invariants.check_servers(client, model.states(), exact=True) == []


def test_same_host_resize_keeps_shared_disk(client):
    host = small_host(client, disk=False, aggregates=[AGG])
    ss = shared_storage(client, AGG)
    _, model = start(client)
    server = model.boot(FLAVOR1)
    assert client.get_consumer(server.uuid).allocations == {host: CPU_MEM1, ss: DISK}
    move = model.resize(server.uuid, FLAVOR2)
    assert move.dest == host
    assert usage(client, host) == CPU_MEM2 and usage(client, ss) == DISK
    model.confirm(server.uuid)
    _reconciled(client, model)
    assert client.get_consumer(server.uuid).allocations == {host: CPU_MEM2, ss: DISK}


def test_same_host_revert_keeps_shared_disk(client):
    host = small_host(client, disk=False, aggregates=[AGG])
    ss = shared_storage(client, AGG)
    _, model = start(client)
    server = model.boot(FLAVOR1)
    model.resize(server.uuid, FLAVOR2)
    model.revert(server.uuid)
    _reconciled(client, model)
    assert client.get_consumer(server.uuid).allocations == {host: CPU_MEM1, ss: DISK}


@pytest.fixture
def two_hosts(client):
    """host1 and host2 share ss, with room for three disks."""
    host1 = small_host(client, "host1", disk=False, aggregates=[AGG])
    host2 = small_host(client, "host2", disk=False, aggregates=[AGG])
    ss = shared_storage(client, AGG, disk_gb=3084)
    return host1, host2, ss


def test_other_host_confirm_and_revert_keep_shared_disk(client, two_hosts):
    host1, host2, ss = two_hosts
    _, model = start(client)
    a = model.boot(FLAVOR1, str(uuid.UUID(int=1)))
    b = model.boot(FLAVOR1, str(uuid.UUID(int=2)))
    assert {a.host, b.host} == {host1, host2}
    # cold migration: never the same host
    move = model.migrate(a.uuid)
    assert move.dest == b.host
    held = client.get_consumer(move.migration_uuid).allocations
    assert held == {a.host: CPU_MEM1, ss: DISK}
    assert client.get_consumer(a.uuid).allocations == {b.host: CPU_MEM1, ss: DISK}
    assert usage(client, ss) == {"DISK_GB": 3084}   # old + new disk of a, b's
    model.revert(a.uuid)
    _reconciled(client, model)
    assert client.get_consumer(a.uuid).allocations == {move.source: CPU_MEM1, ss: DISK}
    move = model.migrate(a.uuid)
    model.confirm(a.uuid)
    _reconciled(client, model)
    assert client.get_consumer(a.uuid).allocations == {move.dest: CPU_MEM1, ss: DISK}
    assert usage(client, ss) == {"DISK_GB": 2056}   # two servers, one disk each


def test_same_host_pick_then_failure_reschedules_to_other_host(client, two_hosts):
    host1, host2, ss = two_hosts
    _, model = start(client, prefer_same_host=True)
    server = model.boot(FLAVOR1, str(uuid.UUID(int=1)))
    move = model.resize(server.uuid, FLAVOR2)
    assert move.dest == move.source == server.host
    other = host2 if server.host == host1 else host1
    new = model.fail_on_destination(server.uuid)
    assert new is not None and new.dest == other
    # migration holds max(old, new) on the source, the instance new on other
    assert client.get_consumer(server.uuid).allocations == {other: CPU_MEM2, ss: DISK}
    mig = client.get_consumer(new.migration_uuid).allocations
    assert mig == {move.source: CPU_MEM2, ss: DISK}
    assert invariants.check_servers(client, model.states(), exact=False) == []
    _reconciled(client, model)   # trims the migration to the old flavor
    assert client.get_consumer(new.migration_uuid).allocations == {
        move.source: CPU_MEM1, ss: DISK}
    model.revert(server.uuid)
    _reconciled(client, model)
    assert client.get_consumer(server.uuid).allocations == {move.source: CPU_MEM1, ss: DISK}
    assert usage(client, ss) == DISK


@pytest.fixture
def small_and_big(client):
    """A small host (the source), a big one the weighers prefer, shared
    storage; (src, big, ss, model, place) where ``place(flavor)`` puts a
    server on the small host directly."""
    src = small_host(client, "small", disk=False, aggregates=[AGG])
    big = add_host(client, "big", {"VCPU": Inventory(16),
                                   "MEMORY_MB": Inventory(65536)}, (AGG,))
    ss = shared_storage(client, AGG, disk_gb=4096)
    _, model = start(client)

    def place(flavor):
        server = str(uuid.UUID(int=1))
        cpu_mem = {rc: n for rc, n in flavor.items() if rc != "DISK_GB"}
        client.put_allocations(server, AllocationWrite(
            {src: cpu_mem, ss: {"DISK_GB": flavor["DISK_GB"]}},
            model.project_id, model.user_id, None))
        model.servers[server] = Server(server, dict(flavor), src)
        return server
    return src, big, ss, model, place


def test_other_host_pick_then_failure_reschedules_to_source(client, small_and_big):
    src, big, ss, model, place = small_and_big
    server = place({"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10})
    move = model.resize(server, {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20})
    assert move.dest == big                   # the weighers prefer the big host
    # the source fits old + new, so nova's conductor may claim it as it is
    assert [a.root for a in model.servers[server].alternates] == [src]
    new = model.fail_on_destination(server)
    assert new is not None and new.dest == src
    assert client.get_consumer(server).allocations == {
        src: {"VCPU": 1, "MEMORY_MB": 2048}, ss: {"DISK_GB": 20}}
    assert client.get_consumer(new.migration_uuid).allocations == {
        src: {"VCPU": 1, "MEMORY_MB": 1024}, ss: {"DISK_GB": 10}}
    assert invariants.check_servers(client, model.states(), exact=False) == []
    _reconciled(client, model)   # folds nova's state into max(old, new)
    assert client.get_consumer(new.migration_uuid).allocations == {}
    model.confirm(server)
    _reconciled(client, model)
    assert client.get_consumer(server).allocations == {
        src: {"VCPU": 1, "MEMORY_MB": 2048}, ss: {"DISK_GB": 20}}
    assert usage(client, big) == {}


def test_source_is_no_alternate_when_it_only_fits_after_release(client, small_and_big):
    src, big, ss, model, place = small_and_big
    server = place({"VCPU": 1, "MEMORY_MB": 6000, "DISK_GB": 10})
    move = model.resize(server, {"VCPU": 1, "MEMORY_MB": 7000, "DISK_GB": 10})
    assert move.dest == big
    assert model.servers[server].alternates == []
    assert model.fail_on_destination(server) is None
    _reconciled(client, model)
    assert client.get_consumer(server).allocations == {
        src: {"VCPU": 1, "MEMORY_MB": 6000}, ss: {"DISK_GB": 10}}


def test_reconcile_restores_a_shared_disk_lost_by_an_old_conductor(client, two_hosts):
    """Rocky's conductor moved only the compute node's allocations to the
    migration, so a revert lost the DISK_GB on the sharing provider."""
    host1, host2, ss = two_hosts
    _, model = start(client)
    server = model.boot(FLAVOR1, str(uuid.UUID(int=1)))
    move = model.migrate(server.uuid)
    mig = client.get_consumer(move.migration_uuid)
    client.put_allocations(move.migration_uuid, mig.write(
        {move.source: CPU_MEM1}))            # the lost DISK_GB
    model.revert(server.uuid)
    assert client.get_consumer(server.uuid).allocations == {move.source: CPU_MEM1}
    _reconciled(client, model)
    assert client.get_consumer(server.uuid).allocations == {move.source: CPU_MEM1, ss: DISK}
