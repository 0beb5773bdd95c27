"""Finding 5 of issue 14: on the placement path the source host is offered
for a same-host resize whatever ``placement_results_limit`` cuts from
placement's answer, without a real release."""

import uuid

from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.lab.fleet import add_host
from scheduler_ext.moves.request import MoveContext, ScheduleRequest
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest
from tests.unit.helpers import start

OLD = {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}
NEW = {"VCPU": 4, "MEMORY_MB": 1024, "DISK_GB": 10}


class PlacementWithCandidates:
    """The embedded placement plus ``GET /allocation_candidates`` answered
    as placement answers it (the engine's exact enumeration, ``limit``
    keeping the first N in provider-uuid order); counts the writes."""

    def __init__(self, inner):
        self.inner = inner
        self.writes = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def allocation_candidates(self, params, microversion=""):
        query = CandidateRequest.from_query(params)
        return CapacityIndex.from_snapshot(self.inner.snapshot()).candidates(query)

    def post_allocations(self, writes):
        self.writes += 1
        return self.inner.post_allocations(writes)

    def put_allocations(self, consumer, write):
        self.writes += 1
        return self.inner.put_allocations(consumer, write)


def _host(client, i, vcpus):
    return add_host(client, f"host{i}", {"VCPU": Inventory(vcpus),
                                         "MEMORY_MB": Inventory(8192),
                                         "DISK_GB": Inventory(100)},
                    uuid=str(uuid.UUID(int=i + 1)))


def test_source_beyond_placements_first_results_is_offered_without_release():
    inner = EmbeddedPlacement()
    # four roomy hosts first in placement's order, the full source last
    for i in range(4):
        _host(inner, i, 8)
    source = _host(inner, 9, 4)
    server, migration = str(uuid.uuid4()), str(uuid.uuid4())
    inner.put_allocations(migration, AllocationWrite(
        {source: OLD}, "p", "u", None, "MIGRATION"))
    client = PlacementWithCandidates(inner)
    drv, _ = start(client, engine="placement", placement_results_limit=2,
                   prefer_same_host=True)
    request = ScheduleRequest(
        (server,), CandidateRequest(NEW), "p", "u",
        move=MoveContext(migration, source, OLD))
    sels = drv.select_destinations(request)[0]
    assert sels[0].root == source
    assert inner.get_consumer(server).allocations == {source: NEW}
    assert inner.get_consumer(migration).allocations == {}
    assert client.writes == 1                 # the claim alone: no release


def test_placement_engine_reads_a_consumer_from_placement_and_names_no_holder_root():
    """The driver's ``read_consumer`` and ``holder_root`` (what nova's
    adapter calls for a move) on the placement source: the consumer as
    placement holds it; no root, since the source keeps no view (the
    adapter then reads the source's ComputeNode record)."""
    inner = EmbeddedPlacement()
    source = _host(inner, 0, 8)
    migration = str(uuid.uuid4())
    inner.put_allocations(migration, AllocationWrite(
        {source: OLD}, "p", "u", None, "MIGRATION"))
    drv, _ = start(PlacementWithCandidates(inner), engine="placement")
    assert drv.read_consumer(migration) == inner.get_consumer(migration)
    assert drv.read_consumer(migration).allocations == {source: OLD}
    assert drv.holder_root({source: OLD}) is None
