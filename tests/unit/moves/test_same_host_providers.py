"""Finding 2 of issue 14 (and issue 10 item 6): a same-host resize keeps
each class on the provider that holds it: the disk stays on the sharing
provider it is on (not the one with the most free space), a root's local
disk stays local even when the root is also in a sharing aggregate."""

import uuid

import pytest

from scheduler_ext.lab import invariants
from scheduler_ext.lab.fleet import SHARING_TRAIT, add_host
from scheduler_ext.lab.nova_model import Server
from scheduler_ext.moves.reconcile import Reconciler
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from tests.unit.helpers import start

AGG = str(uuid.UUID(int=77))
SERVER = str(uuid.UUID(int=1))
CPU_MEM = {"VCPU": 1, "MEMORY_MB": 1024}
OLD = {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 20}
NEW = {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 40}


def _sharing(client, name, disk_gb):
    return add_host(client, name, {"DISK_GB": Inventory(disk_gb)}, (AGG,),
                    (SHARING_TRAIT,))


def _placed(client, model, host, disk_rp):
    client.put_allocations(SERVER, AllocationWrite(
        {host: dict(CPU_MEM), disk_rp: {"DISK_GB": 20}} if disk_rp != host
        else {host: dict(OLD)}, model.project_id, model.user_id, None))
    model.servers[SERVER] = Server(SERVER, dict(OLD), host)


def _reconcile(client, model):
    fixes = Reconciler(client).run(model.states(), apply=True)
    assert all(f.applied for f in fixes)
    assert invariants.check_providers(client) == []
    assert invariants.check_servers(client, model.states(), exact=True) == []


@pytest.mark.parametrize("end", ["confirm", "revert"])
def test_same_host_resize_keeps_disk_on_the_sharing_provider_it_is_on(end):
    client = EmbeddedPlacement()
    host = add_host(client, "host1", {"VCPU": Inventory(8),
                                      "MEMORY_MB": Inventory(8192)}, (AGG,))
    ss1 = _sharing(client, "ss1", 100)     # holds the disk, less free
    ss2 = _sharing(client, "ss2", 1000)    # the most free space
    _, model = start(client)
    _placed(client, model, host, ss1)
    move = model.resize(SERVER, NEW)
    assert move.dest == host
    assert client.get_consumer(SERVER).allocations == {
        host: {"VCPU": 2, "MEMORY_MB": 1024}, ss1: {"DISK_GB": 40}}
    assert client.get_usages(ss2) == {"DISK_GB": 0}
    getattr(model, end)(SERVER)
    _reconcile(client, model)
    flavor = NEW if end == "confirm" else OLD
    assert client.get_consumer(SERVER).allocations == {
        host: {"VCPU": flavor["VCPU"], "MEMORY_MB": 1024},
        ss1: {"DISK_GB": flavor["DISK_GB"]}}
    assert client.get_usages(ss1) == {"DISK_GB": flavor["DISK_GB"]}
    assert client.get_usages(ss2) == {"DISK_GB": 0}


def test_same_host_resize_keeps_a_local_disk_of_a_root_in_a_sharing_aggregate():
    client = EmbeddedPlacement()
    host = add_host(client, "host1", {"VCPU": Inventory(8),
                                      "MEMORY_MB": Inventory(8192),
                                      "DISK_GB": Inventory(100)}, (AGG,))
    ss = _sharing(client, "ss1", 1000)
    _, model = start(client)
    _placed(client, model, host, host)
    move = model.resize(SERVER, NEW)
    assert move.dest == host
    assert client.get_consumer(SERVER).allocations == {host: NEW}
    assert client.get_usages(ss) == {"DISK_GB": 0}
    model.confirm(SERVER)
    _reconcile(client, model)
    assert client.get_consumer(SERVER).allocations == {host: NEW}


def test_same_host_is_not_offered_when_the_disk_provider_is_full():
    """The disk cannot grow where it is: the same host is no candidate
    (moving a disk between sharing providers is no same-host resize); the
    server goes to another host, its migration keeping the old disk."""
    client = EmbeddedPlacement()
    host = add_host(client, "host1", {"VCPU": Inventory(8),
                                      "MEMORY_MB": Inventory(8192)}, (AGG,))
    other = add_host(client, "host2", {"VCPU": Inventory(8),
                                       "MEMORY_MB": Inventory(8192),
                                       "DISK_GB": Inventory(100)})
    ss1 = _sharing(client, "ss1", 30)      # 20 used by the server
    _sharing(client, "ss2", 1000)
    _, model = start(client, prefer_same_host=True)
    _placed(client, model, host, ss1)
    move = model.resize(SERVER, NEW)
    assert move.dest == other
    assert client.get_consumer(move.migration_uuid).allocations == {
        host: CPU_MEM, ss1: {"DISK_GB": 20}}
