"""Boots with granular groups through the driver and the engine source on
provider trees (embedded placement): the claim lands on the child
providers, the Selections carry placement's ``mappings``, and an engine
that cannot tell whether a custom trait exists asks placement."""

import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.moves.request import ScheduleRequest
from scheduler_ext.placement import Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest, RequestGroup
from tests.unit.helpers import start

BW = "NET_BW_EGR_KILOBIT_PER_SEC"
PORT = "6f1b7c2e-4a5d-4e3f-8a9b-0c1d2e3f4a5b"


def host_with_children(client, name):
    """A compute node with a NIC (bandwidth, physnet trait) and a pGPU."""
    cn = client.create_provider(name)
    client.set_inventories(cn.uuid, cn.generation,
                           {"VCPU": Inventory(4), "MEMORY_MB": Inventory(4096)})
    nic = client.create_provider(f"{name}-nic", parent_provider_uuid=cn.uuid)
    gen = client.set_inventories(nic.uuid, nic.generation, {BW: Inventory(10000)})
    client.set_traits(nic.uuid, gen, ["CUSTOM_PHYSNET0"])
    gpu = client.create_provider(f"{name}-gpu", parent_provider_uuid=cn.uuid)
    client.set_inventories(gpu.uuid, gpu.generation, {"VGPU": Inventory(1)})
    return cn.uuid, nic.uuid, gpu.uuid


@pytest.fixture
def client():
    c = EmbeddedPlacement()
    c.create_trait("CUSTOM_PHYSNET0")
    return c


def port_request(n=1):
    return CandidateRequest(
        {"VCPU": 1, "MEMORY_MB": 512},
        granular=(RequestGroup(PORT, {BW: 1000}, required=frozenset(["CUSTOM_PHYSNET0"])),
                  RequestGroup("_GPU", {"VGPU": 1})),
        group_policy="isolate")


def boot(drv, n, query):
    return drv.select_destinations(ScheduleRequest(
        (str(uuid.UUID(int=n)),), query, "p", "u"))[0]


def test_a_port_and_a_vgpu_land_on_the_children(client):
    cn, nic, gpu = host_with_children(client, "host1")
    drv, _ = start(client)
    sel = boot(drv, 1, port_request())[0]
    assert sel.root == cn
    assert dict(sel.mappings) == {"": [cn], PORT: [nic], "_GPU": [gpu]}
    held = client.get_consumer(str(uuid.UUID(int=1))).allocations
    assert held == {cn: {"VCPU": 1, "MEMORY_MB": 512}, nic: {BW: 1000}, gpu: {"VGPU": 1}}


def test_the_child_fills_up_and_the_next_host_is_used(client):
    first = host_with_children(client, "host1")
    second = host_with_children(client, "host2")
    drv, _ = start(client)
    roots = {boot(drv, n, port_request())[0].root for n in (1, 2)}
    assert roots == {first[0], second[0]}      # one VGPU per host
    with pytest.raises(errors.NoValidHost):
        boot(drv, 3, port_request())
    assert client.get_consumer(str(uuid.UUID(int=3))).allocations == {}


def test_alternates_carry_their_own_mappings(client):
    hosts = [host_with_children(client, f"host{i}") for i in range(3)]
    drv, _ = start(client)
    sels = boot(drv, 1, port_request())
    assert len(sels) == 3
    for sel in sels:
        cn, nic, gpu = next(h for h in hosts if h[0] == sel.root)
        assert dict(sel.mappings) == {"": [cn], PORT: [nic], "_GPU": [gpu]}


def test_an_unknown_custom_trait_asks_placement_or_fails_cleanly(client):
    """The embedded snapshot lists placement's custom traits: a trait it
    never created is placement's 400, nothing is written."""
    host_with_children(client, "host1")
    drv, _ = start(client)
    query = CandidateRequest({"VCPU": 1}, forbidden=frozenset(["CUSTOM_NEVER_CREATED"]))
    with pytest.raises(errors.InvalidRequest, match="No such trait"):
        boot(drv, 1, query)
    assert client.get_consumer(str(uuid.UUID(int=1))).allocations == {}
