"""Findings 1, 2 and 4 of issue 33: with candidates from placement itself
(``engine = placement``) the same-host candidate is the one the engine
gives: every class the server holds stays on the provider holding it
(``engine.pinned``), the source is found whatever placement's answer
holds or ``placement_results_limit`` cuts from it, no release is ever
written before the claim, and a class only a sharing provider of the
source's aggregates supplies is found there.

The query forbids a ``CUSTOM_`` trait that no provider of the source
holds: a query the source's own providers alone cannot name (placement
knows the trait), which used to send the move down a real release of the
old allocations."""

import dataclasses
import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.lab import invariants
from scheduler_ext.lab.fleet import SHARING_TRAIT, add_host
from scheduler_ext.lab.nova_model import Server
from scheduler_ext.moves.reconcile import Reconciler
from scheduler_ext.moves.request import MoveContext, ScheduleRequest
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest
from tests.unit.helpers import start
from tests.unit.sources.test_placement_source import PlacementWithCandidates

AGG = str(uuid.UUID(int=77))
SERVER = str(uuid.UUID(int=1))
MIGRATION = str(uuid.UUID(int=2))
TRAIT = "CUSTOM_NOT_ON_THE_SOURCE"
CPU_MEM = {"VCPU": 1, "MEMORY_MB": 1024}
OLD = {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 20}
NEW = {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 40}


@pytest.fixture
def client():
    """Placement with ``GET /allocation_candidates`` that counts writes
    (the functional module gives a real placement instead), with
    ``TRAIT`` known."""
    client = PlacementWithCandidates(EmbeddedPlacement())
    client.create_trait(TRAIT)
    return client


def _writes(client) -> int:
    return getattr(client, "writes", -1)


def _host(client, name, disk=None, uuid_int=None, aggregates=(AGG,)):
    invs = {"VCPU": Inventory(8), "MEMORY_MB": Inventory(8192)}
    if disk:
        invs["DISK_GB"] = Inventory(disk)
    kwargs = {"uuid": str(uuid.UUID(int=uuid_int))} if uuid_int else {}
    return add_host(client, name, invs, aggregates, **kwargs)


def _sharing(client, name, disk_gb, uuid_int=None):
    kwargs = {"uuid": str(uuid.UUID(int=uuid_int))} if uuid_int else {}
    return add_host(client, name, {"DISK_GB": Inventory(disk_gb)}, (AGG,),
                    (SHARING_TRAIT,), **kwargs)


def _forbidding(drv, model):
    """The model's scheduler with the query forbidding ``TRAIT`` (made
    before the driver started)."""

    def scheduler(req):
        return drv.select_destinations(dataclasses.replace(req, query=req.query.replace(
            forbidden=req.query.forbidden | {TRAIT})))
    model.scheduler = scheduler


def _placed(client, model, allocs, flavor, host):
    client.put_allocations(SERVER, AllocationWrite(
        allocs, model.project_id, model.user_id, None, "INSTANCE"))
    model.servers[SERVER] = Server(SERVER, dict(flavor), host)


def _reconciled(client, model):
    fixes = Reconciler(client).run(model.states(), apply=True)
    assert all(f.applied for f in fixes)
    assert invariants.check_providers(client) == []
    assert invariants.check_servers(client, model.states(), exact=True) == []


@pytest.mark.parametrize("end", ["confirm", "revert"])
def test_placement_source_same_host_keeps_the_disk_on_its_sharing_provider(
        client, end):
    """Finding 1: the disk on ss1, ss2 with the most free space. Before
    the fix the instance held ss1: 20 and ss2: 40 during the resize, and
    ss2: 40 after confirm while the disk stays on ss1."""
    host = _host(client, "host1")
    ss1 = _sharing(client, "ss1", 100)
    ss2 = _sharing(client, "ss2", 1000)
    drv, model = start(client, engine="placement")
    _forbidding(drv, model)
    _placed(client, model, {host: dict(CPU_MEM), ss1: {"DISK_GB": 20}},
            OLD, host)
    move = model.resize(SERVER, NEW)
    assert move.dest == host
    assert client.get_consumer(SERVER).allocations == {
        host: {"VCPU": 2, "MEMORY_MB": 1024}, ss1: {"DISK_GB": 40}}
    assert client.get_consumer(move.migration_uuid).allocations == {}
    assert client.get_usages(ss2) == {"DISK_GB": 0}
    getattr(model, end)(SERVER)
    _reconciled(client, model)
    flavor = NEW if end == "confirm" else OLD
    assert client.get_consumer(SERVER).allocations == {
        host: {"VCPU": flavor["VCPU"], "MEMORY_MB": 1024},
        ss1: {"DISK_GB": flavor["DISK_GB"]}}
    assert client.get_usages(ss2) == {"DISK_GB": 0}


def test_placement_source_offers_the_source_beyond_the_results_limit(client):
    """Finding 1, ``placement_results_limit = 2``: two roomy hosts come
    first in placement's order; before the fix the source was not offered
    and the server moved."""
    for i in range(2):
        _host(client, f"roomy{i}", disk=100, uuid_int=10 + i, aggregates=())
    source = _host(client, "source", disk=100, uuid_int=90, aggregates=())
    drv, _ = start(client, engine="placement", placement_results_limit=2,
                   prefer_same_host=True)
    client.put_allocations(MIGRATION, AllocationWrite(
        {source: OLD}, "p", "u", None, "MIGRATION"))
    request = ScheduleRequest(
        (SERVER,), CandidateRequest(NEW, forbidden=frozenset({TRAIT})), "p",
        "u", move=MoveContext(MIGRATION, source, OLD))
    sels = drv.select_destinations(request)[0]
    assert sels[0].root == source
    assert client.get_consumer(SERVER).allocations == {source: NEW}
    assert client.get_consumer(MIGRATION).allocations == {}


def test_placement_source_never_releases_the_old_allocations_before_the_claim(
        client):
    """Finding 2: a release written before the claim opens a window in
    which a crash leaves the server holding nothing (and its journal was
    never recovered). The scheduler writes once: the claim."""
    host = _host(client, "host1", disk=100, aggregates=())
    drv, model = start(client, engine="placement")
    _forbidding(drv, model)
    _placed(client, model, {host: dict(OLD)}, OLD, host)
    decide, writes = model.scheduler, []

    def counted(req):
        before = _writes(client)
        try:
            return decide(req)
        finally:
            writes.append(_writes(client) - before)
    model.scheduler = counted
    move = model.resize(SERVER, NEW)
    assert move.dest == host
    if _writes(client) >= 0:        # the embedded placement counts them
        assert writes == [1]
    assert client.get_consumer(SERVER).allocations == {host: NEW}


@pytest.mark.parametrize("engine", ["numpy", "placement"])
def test_same_host_finds_a_class_only_a_sharing_provider_supplies(
        client, engine):
    """Finding 4: a boot-from-volume server (no disk) resized to a 20 GB
    disk flavor on a host whose disk is only shared. Stock claims the
    source (the new flavor fits beside the old); before the fix the
    placement source never read ss1 and answered NoValidHost."""
    host = _host(client, "host1")
    ss1 = _sharing(client, "ss1", 100)
    _, model = start(client, engine=engine)
    _placed(client, model, {host: dict(CPU_MEM)}, CPU_MEM, host)
    new = {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 20}
    move = model.resize(SERVER, new)
    assert move.dest == host
    assert client.get_consumer(SERVER).allocations == {
        host: {"VCPU": 2, "MEMORY_MB": 1024}, ss1: {"DISK_GB": 20}}
    assert client.get_consumer(move.migration_uuid).allocations == {}
    model.confirm(SERVER)
    _reconciled(client, model)
    assert client.get_usages(ss1) == {"DISK_GB": 20}


def test_list_sharing_providers_names_the_sharing_providers_of_aggregates(client):
    """What the placement source reads to find the sharing providers of
    the source's aggregates (``GET /resource_providers?member_of=in:...
    &required=MISC_SHARES_VIA_AGGREGATE`` on a real placement)."""
    _host(client, "host1")
    ss1 = _sharing(client, "ss1", 100)
    add_host(client, "ss-elsewhere", {"DISK_GB": Inventory(100)},
             (str(uuid.UUID(int=78)),), (SHARING_TRAIT,))
    assert [p.uuid for p in client.list_sharing_providers([AGG])] == [ss1]
    assert client.list_sharing_providers([]) == []
    with pytest.raises(errors.InvalidRequest, match="aggregates"):
        client.list_sharing_providers(["not-a-uuid"])
