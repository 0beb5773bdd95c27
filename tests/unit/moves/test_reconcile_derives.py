"""Issue 33, findings 3, 6 and 8: the reconcile changes only what it can
derive. Flavor classes come from the flavor; every other class (a QoS
port's bandwidth, ...) is kept exactly once, on the provider that held it,
never summed across the instance and a migration, never dropped; each class
stays on the provider the server held it on (a same-host revert keeps the
vGPU on its pGPU, the disk on its sharing provider); what cannot be placed
with certainty is reported, not guessed.

The placement states are the ones nova's own code leaves: a same-host move
rescheduled onto the source by nova's conductor (instance: new flavor,
migration: old flavor), a move whose conductor died (the migration holds
everything). ``client`` is overridden by the functional twin of this module
to run on a real placement."""

import uuid

import pytest

from scheduler_ext.lab import invariants
from scheduler_ext.lab.fleet import SHARING_TRAIT, add_host
from scheduler_ext.lab.nova_model import Server
from scheduler_ext.moves.reconcile import MoveState, Reconciler
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from tests.unit.helpers import start, usage

BW = "NET_BW_EGR_KILOBIT_PER_SEC"
AGG = str(uuid.UUID(int=33))
OLD = {"VCPU": 1, "MEMORY_MB": 1024}
NEW = {"VCPU": 2, "MEMORY_MB": 512}
MAX = {"VCPU": 2, "MEMORY_MB": 1024}


@pytest.fixture
def client():
    return EmbeddedPlacement()


def _child(client, parent, name, invs):
    prov = client.create_provider(name, parent_provider_uuid=parent)
    client.set_inventories(prov.uuid, prov.generation, invs)
    return prov.uuid


def _nic_host(client):
    cn = add_host(client, "cn", {"VCPU": Inventory(8), "MEMORY_MB": Inventory(8192)})
    return cn, _child(client, cn, "nic", {BW: Inventory(10000)})


def _gpu_host(client):
    cn = add_host(client, "cn", {"VCPU": Inventory(8), "MEMORY_MB": Inventory(8192)})
    return (cn, _child(client, cn, "pgpu1", {"VGPU": Inventory(4)}),
            _child(client, cn, "pgpu2", {"VGPU": Inventory(4)}))


def _server(model, host, flavor, held, migration=None, mig_held=None,
            in_progress=True, new_flavor=None):
    """A server nova knows on ``host`` with ``flavor``, placement holding
    ``held`` for it and ``mig_held`` for its migration (a same-host move,
    in progress or dead)."""
    client = model.client
    server = str(uuid.uuid4())
    if held:
        client.put_allocations(server, AllocationWrite(
            held, model.project_id, model.user_id, None, "INSTANCE"))
    moves = []
    if migration is not None:
        if mig_held:
            client.put_allocations(migration, AllocationWrite(
                mig_held, model.project_id, model.user_id, None, "MIGRATION"))
        moves.append(MoveState(migration, host, host, dict(flavor),
                               dict(new_flavor or flavor), in_progress))
        model.migration_owner[migration] = server
    model.servers[server] = Server(server, dict(flavor), host, moves)
    return server


def _reconcile(client, model):
    fixes = Reconciler(client).run(model.states(), apply=True)
    assert all(f.applied for f in fixes), [f.error for f in fixes]
    assert invariants.check_providers(client) == []


# ---------------------------------------------------------------- finding 3
@pytest.mark.parametrize("end", ["confirm", "revert"])
def test_a_qos_ports_bandwidth_is_held_once_after_a_reschedule_onto_the_source(
        client, end):
    """nova's conductor rescheduled onto the source: the instance holds
    the new flavor and the migration the old one, both with the port's
    1000 kbps on the NIC. The reconcile folds the flavors into max(old,
    new) and keeps the port's bandwidth once; confirm and revert end with
    the live flavor and the port, 1000 kbps on the NIC."""
    cn, nic = _nic_host(client)
    _, model = start(client)
    mig = str(uuid.uuid4())
    server = _server(model, cn, OLD, {cn: NEW, nic: {BW: 1000}},
                     mig, {cn: OLD, nic: {BW: 1000}}, new_flavor=NEW)
    assert usage(client, nic) == {BW: 2000}         # nova's own state
    _reconcile(client, model)
    assert usage(client, nic) == {BW: 1000}
    assert client.get_consumer(server).allocations == {cn: MAX, nic: {BW: 1000}}
    assert client.get_consumer(mig).allocations == {}
    getattr(model, end)(server)
    _reconcile(client, model)
    live = NEW if end == "confirm" else OLD
    assert client.get_consumer(server).allocations == {cn: live, nic: {BW: 1000}}
    assert usage(client, nic) == {BW: 1000}


# ---------------------------------------------------------------- finding 8
def test_a_ports_bandwidth_held_only_by_a_dead_moves_migration_goes_to_the_instance(
        client):
    """The conductor died after moving everything to the migration: the
    instance holds nothing, the dead migration the flavor and the port's
    bandwidth. Both come back to the instance; the NIC keeps its 1000."""
    cn, nic = _nic_host(client)
    _, model = start(client)
    mig = str(uuid.uuid4())
    server = _server(model, cn, OLD, {}, mig, {cn: OLD, nic: {BW: 1000}},
                     in_progress=False)
    _reconcile(client, model)
    assert client.get_consumer(server).allocations == {cn: OLD, nic: {BW: 1000}}
    assert client.get_consumer(mig).allocations == {}
    assert usage(client, nic) == {BW: 1000}


def test_a_ports_bandwidth_held_twice_by_instance_and_dead_migration_is_kept_once(
        client):
    cn, nic = _nic_host(client)
    _, model = start(client)
    mig = str(uuid.uuid4())
    server = _server(model, cn, OLD, {cn: OLD, nic: {BW: 1000}},
                     mig, {cn: OLD, nic: {BW: 1000}}, in_progress=False)
    _reconcile(client, model)
    assert client.get_consumer(server).allocations == {cn: OLD, nic: {BW: 1000}}
    assert usage(client, nic) == {BW: 1000}


def test_a_port_held_on_two_nics_by_instance_and_migration_is_reported_not_guessed(
        client):
    """A dead same-host move left the port's bandwidth on NIC a (the
    migration) and NIC b (the instance): which one the port is bound to
    cannot be derived from placement. The instance is reported (a Fix
    with an error) and nothing is written."""
    cn, nic = _nic_host(client)
    nic_b = _child(client, cn, "nic-b", {BW: Inventory(10000)})
    _, model = start(client)
    mig = str(uuid.uuid4())
    server = _server(model, cn, OLD, {cn: OLD, nic_b: {BW: 1000}},
                     mig, {cn: OLD, nic: {BW: 1000}}, in_progress=False)
    before = invariants.state(client)
    fixes = Reconciler(client).run(model.states(), apply=True)
    assert [(f.instance_uuid, f.applied) for f in fixes] == [(server, False)]
    assert BW in fixes[0].error
    assert invariants.state(client) == before


# ---------------------------------------------------------------- finding 6
@pytest.mark.parametrize("end, old_vgpus, new_vgpus", [
    ("revert", 1, 2), ("confirm", 2, 1)])
def test_a_same_host_move_keeps_the_vgpu_on_the_pgpu_the_live_flavor_used(
        client, end, old_vgpus, new_vgpus):
    """nova's same-host state with the vGPUs on two pGPUs (old on pgpu1,
    new on pgpu2): the reconcile cannot fold it without forgetting which
    pGPU is whose, so it leaves it; after a revert the vGPU is on pgpu1,
    after a confirm on pgpu2, never moved by the reconcile."""
    cn, pgpu1, pgpu2 = _gpu_host(client)
    _, model = start(client)
    mig = str(uuid.uuid4())
    old, new = dict(OLD, VGPU=old_vgpus), dict(NEW, VGPU=new_vgpus)
    server = _server(model, cn, old, {cn: NEW, pgpu2: {"VGPU": new_vgpus}},
                     mig, {cn: OLD, pgpu1: {"VGPU": old_vgpus}}, new_flavor=new)
    _reconcile(client, model)
    getattr(model, end)(server)
    _reconcile(client, model)
    want = ({cn: OLD, pgpu1: {"VGPU": old_vgpus}} if end == "revert"
            else {cn: NEW, pgpu2: {"VGPU": new_vgpus}})
    assert client.get_consumer(server).allocations == want
    assert invariants.check_servers(client, model.states(), exact=True) == []


@pytest.mark.parametrize("end, old_disk, new_disk", [
    ("revert", 20, 40), ("confirm", 40, 20)])
def test_a_same_host_move_keeps_the_disk_on_the_sharing_provider_the_live_flavor_used(
        client, end, old_disk, new_disk):
    """The same with the disk on two sharing providers of the host's
    aggregate: old on ss1, new on ss2."""
    cn = add_host(client, "cn", {"VCPU": Inventory(8), "MEMORY_MB": Inventory(8192)},
                  (AGG,))
    ss1, ss2 = (add_host(client, name, {"DISK_GB": Inventory(100)}, (AGG,),
                         (SHARING_TRAIT,)) for name in ("ss1", "ss2"))
    _, model = start(client)
    mig = str(uuid.uuid4())
    old, new = dict(OLD, DISK_GB=old_disk), dict(NEW, DISK_GB=new_disk)
    server = _server(model, cn, old, {cn: NEW, ss2: {"DISK_GB": new_disk}},
                     mig, {cn: OLD, ss1: {"DISK_GB": old_disk}}, new_flavor=new)
    _reconcile(client, model)
    getattr(model, end)(server)
    _reconcile(client, model)
    want = ({cn: OLD, ss1: {"DISK_GB": old_disk}} if end == "revert"
            else {cn: NEW, ss2: {"DISK_GB": new_disk}})
    assert client.get_consumer(server).allocations == want
    assert usage(client, ss1 if end == "confirm" else ss2) == {}
