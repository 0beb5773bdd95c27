"""Same-host resizes on provider trees (issue 14 finding 2 with issue 10):
the old allocations' child providers are kept, for the unnumbered group
and for granular groups, by the engine source and by the placement source
(which reads the source's whole tree); granular groups fall back to the
engine's own picks on the same host when the kept providers cannot serve
them; the mappings follow the providers claimed. vGPUs are devices
(issue 33 finding 5): the new ones are claimed beside the old, as stock
claims them."""

import uuid

import pytest

from scheduler_ext.lab import invariants
from scheduler_ext.lab.fleet import add_host
from scheduler_ext.lab.nova_model import Server
from scheduler_ext.moves.reconcile import Reconciler
from scheduler_ext.moves.request import MoveContext, ScheduleRequest
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest, RequestGroup
from tests.unit.helpers import start
from tests.unit.sources.test_placement_source import PlacementWithCandidates

SERVER, MIGRATION = str(uuid.UUID(int=101)), str(uuid.UUID(int=102))
CPU = {"VCPU": 1, "MEMORY_MB": 512}
BW = "NET_BW_EGR_KILOBIT_PER_SEC"


def _child(client, parent, name, invs, traits=()):
    prov = client.create_provider(name, parent_provider_uuid=parent)
    gen = client.set_inventories(prov.uuid, prov.generation, invs)
    if traits:
        client.set_traits(prov.uuid, gen, list(traits))
    return prov.uuid


def gpu_host(client, big=8, small=2):
    """A compute node with two pGPUs (the roomier one first in uuid order
    and with the most free vGPUs: the engine's own pick) and a NIC."""
    cn = add_host(client, "cn", {"VCPU": Inventory(8), "MEMORY_MB": Inventory(8192)})
    gpu_a = _child(client, cn, "gpu-a", {"VGPU": Inventory(big)})
    gpu_b = _child(client, cn, "gpu-b", {"VGPU": Inventory(small)})
    nic = _child(client, cn, "nic", {BW: Inventory(10000)}, ["CUSTOM_PHYSNET0"])
    return cn, gpu_a, gpu_b, nic


def _moving(client, old):
    """The server's old allocations moved to the migration (as nova's
    conductor does before scheduling)."""
    client.put_allocations(MIGRATION, AllocationWrite(old, "p", "u", None, "MIGRATION"))


def _resize(drv, cn, query, old_flavor):
    return drv.select_destinations(ScheduleRequest(
        (SERVER,), query, "p", "u",
        move=MoveContext(MIGRATION, cn, old_flavor)))[0][0]


def _vgpu_query(n, **group):
    return CandidateRequest({"VCPU": 2, "MEMORY_MB": 512},
                            granular=(RequestGroup("_GPU", {"VGPU": n}, **group),))


@pytest.fixture
def client():
    c = EmbeddedPlacement()
    c.create_trait("CUSTOM_PHYSNET0")
    return c


@pytest.mark.parametrize("engine", ["numpy", "placement"])
def test_a_granular_vgpu_resize_takes_a_new_vgpu_beside_the_old(client, engine):
    """A vGPU is a device (issue 33 finding 5): the new flavor's vGPU
    beside the old one, as stock claims it (the engine's pick, pGPU A),
    the migration holding the old flavor, in one write."""
    cn, gpu_a, gpu_b, _ = gpu_host(client)
    _moving(client, {cn: CPU, gpu_b: {"VGPU": 1}})
    placement = PlacementWithCandidates(client)
    drv, _ = start(placement, engine=engine, prefer_same_host=True)
    sel = _resize(drv, cn, _vgpu_query(1), {"VCPU": 1, "MEMORY_MB": 512})
    assert sel.root == cn
    assert dict(sel.mappings) == {"": [cn], "_GPU": [gpu_a]}
    assert client.get_consumer(SERVER).allocations == {
        cn: {"VCPU": 2, "MEMORY_MB": 512}, gpu_a: {"VGPU": 1}}
    assert client.get_consumer(MIGRATION).allocations == {
        cn: CPU, gpu_b: {"VGPU": 1}}
    assert placement.writes == 1        # the claim alone: no release


@pytest.mark.parametrize("engine", ["numpy", "placement"])
def test_an_unnumbered_vgpu_resize_takes_a_new_vgpu_beside_the_old(client, engine):
    cn, gpu_a, gpu_b, _ = gpu_host(client)
    _moving(client, {cn: CPU, gpu_b: {"VGPU": 1}})
    drv, _ = start(PlacementWithCandidates(client), engine=engine,
                   prefer_same_host=True)
    query = CandidateRequest({"VCPU": 2, "MEMORY_MB": 512, "VGPU": 1})
    sel = _resize(drv, cn, query, {"VCPU": 1, "MEMORY_MB": 512, "VGPU": 1})
    assert sel.root == cn
    assert client.get_consumer(SERVER).allocations == {
        cn: {"VCPU": 2, "MEMORY_MB": 512}, gpu_a: {"VGPU": 1}}
    assert client.get_consumer(MIGRATION).allocations == {
        cn: CPU, gpu_b: {"VGPU": 1}}
    assert sorted(sel.mappings[""]) == sorted([cn, gpu_a])


def test_a_vgpu_that_cannot_grow_where_it_is_takes_the_engines_pick(client):
    """pGPU B has 2 vGPUs; the new flavor wants 3: the same host is still
    offered, the new vGPUs on pGPU A beside the old one."""
    cn, gpu_a, gpu_b, _ = gpu_host(client)
    _moving(client, {cn: CPU, gpu_b: {"VGPU": 1}})
    drv, _ = start(client, prefer_same_host=True)
    sel = _resize(drv, cn, _vgpu_query(3), {"VCPU": 1, "MEMORY_MB": 512})
    assert sel.root == cn
    assert dict(sel.mappings) == {"": [cn], "_GPU": [gpu_a]}
    assert client.get_consumer(SERVER).allocations == {
        cn: {"VCPU": 2, "MEMORY_MB": 512}, gpu_a: {"VGPU": 3}}
    assert client.get_consumer(MIGRATION).allocations == {
        cn: CPU, gpu_b: {"VGPU": 1}}


def test_a_kept_provider_that_breaks_the_groups_filter_is_not_used(client):
    """The new group requires a trait only pGPU A has."""
    client.create_trait("CUSTOM_VGPU_FAST")
    cn, gpu_a, gpu_b, _ = gpu_host(client)
    client.set_traits(gpu_a, client.get_provider(gpu_a).generation, ["CUSTOM_VGPU_FAST"])
    _moving(client, {cn: CPU, gpu_b: {"VGPU": 1}})
    drv, _ = start(client, prefer_same_host=True)
    query = _vgpu_query(1, required=frozenset(["CUSTOM_VGPU_FAST"]))
    sel = _resize(drv, cn, query, {"VCPU": 1, "MEMORY_MB": 512})
    assert dict(sel.mappings) == {"": [cn], "_GPU": [gpu_a]}


def test_two_vgpu_groups_isolated_stay_on_their_two_pgpus(client):
    cn, gpu_a, gpu_b, nic = gpu_host(client, big=8, small=8)
    _moving(client, {cn: CPU, gpu_a: {"VGPU": 1}, gpu_b: {"VGPU": 1},
                     nic: {BW: 1000}})
    drv, _ = start(client, prefer_same_host=True)
    query = CandidateRequest(
        {"VCPU": 2, "MEMORY_MB": 512},
        granular=(RequestGroup("_G1", {"VGPU": 1}), RequestGroup("_G2", {"VGPU": 1}),
                  RequestGroup("_PORT", {BW: 2000},
                               required=frozenset(["CUSTOM_PHYSNET0"]))),
        group_policy="isolate")
    sel = _resize(drv, cn, query, {"VCPU": 1, "MEMORY_MB": 512})
    assert sel.root == cn
    assert {sel.mappings["_G1"][0], sel.mappings["_G2"][0]} == {gpu_a, gpu_b}
    assert sel.mappings["_PORT"] == [nic]
    assert client.get_consumer(SERVER).allocations == {
        cn: {"VCPU": 2, "MEMORY_MB": 512}, gpu_a: {"VGPU": 1},
        gpu_b: {"VGPU": 1}, nic: {BW: 2000}}


@pytest.mark.parametrize("end", ["confirm", "revert"])
def test_reconcile_after_a_same_host_resize_keeps_the_live_vgpu_on_its_pgpu(
        client, end):
    """The reconcile places flavor classes on the host's child providers
    too (the pGPU holding the vGPU), never looking for a sharing one:
    confirm leaves the new vGPU (pGPU A, beside the old), revert the old
    one where it was (pGPU B)."""
    cn, gpu_a, gpu_b, _ = gpu_host(client)
    old = {"VCPU": 1, "MEMORY_MB": 512, "VGPU": 1}
    new = {"VCPU": 2, "MEMORY_MB": 1024, "VGPU": 1}
    _, model = start(client)
    client.put_allocations(SERVER, AllocationWrite(
        {cn: CPU, gpu_b: {"VGPU": 1}}, model.project_id, model.user_id, None))
    model.servers[SERVER] = Server(SERVER, dict(old), cn)
    assert model.resize(SERVER, new).dest == cn
    getattr(model, end)(SERVER)
    fixes = Reconciler(client).run(model.states(), apply=True)
    assert all(f.applied for f in fixes)
    flavor, gpu = (new, gpu_a) if end == "confirm" else (old, gpu_b)
    assert client.get_consumer(SERVER).allocations == {
        cn: {"VCPU": flavor["VCPU"], "MEMORY_MB": flavor["MEMORY_MB"]},
        gpu: {"VGPU": 1}}
    assert invariants.check_servers(client, model.states(), exact=True) == []
