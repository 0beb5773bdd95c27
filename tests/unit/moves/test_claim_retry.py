"""Finding 1 of issue 14: a claim retried after a 409 must not write
allocations computed from contents that changed in between."""

import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.lab import invariants
from scheduler_ext.moves.request import MoveContext, ScheduleRequest
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.lab.fleet import add_host
from scheduler_ext.placement import Inventory
from tests.unit.helpers import start

OLD = {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10}
NEW = {"VCPU": 4, "MEMORY_MB": 1024, "DISK_GB": 10}


def host(client, name):
    return add_host(client, name, {"VCPU": Inventory(8),
                                   "MEMORY_MB": Inventory(8192),
                                   "DISK_GB": Inventory(100)})


SERVER = str(uuid.UUID(int=101))
MIGRATION = str(uuid.UUID(int=102))


class ConductorMovesBackFirst:
    """Delegates to ``inner``; just before the first allocation write the
    scheduler sends, nova's conductor abandons the move: it moves the
    migration's allocations back onto the instance (one write that bumps
    both consumer generations), so our write gets a consumer-generation
    409."""

    def __init__(self, inner):
        self.inner = inner
        self.fired = False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def post_allocations(self, writes):
        if not self.fired:
            self.fired = True
            mig = self.inner.get_consumer(MIGRATION)
            inst = self.inner.get_consumer(SERVER)
            self.inner.post_allocations({
                MIGRATION: mig.write({}, consumer_type="MIGRATION"),
                SERVER: inst.write(mig.allocations, consumer_type="INSTANCE",
                                   project_id="p", user_id="u")})
        return self.inner.post_allocations(writes)


@pytest.mark.parametrize("same_host", [True, False])
def test_claim_is_not_retried_with_stale_allocations_after_a_409(same_host):
    inner = EmbeddedPlacement()
    host1 = host(inner, "host1")
    host2 = host(inner, "host2")
    host3 = host(inner, "host3")
    # the server runs on host1; nova's conductor moved its allocations to
    # the migration consumer before scheduling
    inner.put_allocations(MIGRATION, AllocationWrite(
        {host1: OLD}, "p", "u", None, "MIGRATION"))
    client = ConductorMovesBackFirst(inner)
    drv, _ = start(client)
    request = ScheduleRequest(
        (SERVER,), CandidateRequest({"VCPU": 4, "MEMORY_MB": 1024,
                                     "DISK_GB": 10}), "p", "u",
        move=MoveContext(MIGRATION, host1, OLD, allow_same_host=same_host))
    with pytest.raises(errors.ConcurrentUpdate, match="changed while scheduling"):
        drv.select_destinations(request)
    # exactly what the conductor left: the instance holds its old flavor on
    # its source, the migration nothing, nothing anywhere else
    assert inner.get_consumer(SERVER).allocations == {host1: OLD}
    assert inner.get_consumer(MIGRATION).allocations == {}
    for other in (host2, host3):
        assert inner.get_usages(other) == {"VCPU": 0, "MEMORY_MB": 0,
                                           "DISK_GB": 0}
    assert invariants.check_providers(inner) == []


def test_claim_is_retried_when_only_generations_moved():
    """A write that left every consumer's contents as they were (the same
    allocations written again) is no reason to give up: the claim is
    retried with the new generations."""
    inner = EmbeddedPlacement()
    host1 = host(inner, "host1")
    inner.put_allocations(MIGRATION, AllocationWrite(
        {host1: OLD}, "p", "u", None, "MIGRATION"))

    class Rewrites(ConductorMovesBackFirst):
        def post_allocations(self, writes):
            if not self.fired:
                self.fired = True
                mig = self.inner.get_consumer(MIGRATION)
                self.inner.put_allocations(MIGRATION, mig.write(
                    mig.allocations, consumer_type="MIGRATION"))
            return self.inner.post_allocations(writes)

    drv, _ = start(Rewrites(inner))
    request = ScheduleRequest(
        (SERVER,), CandidateRequest(NEW), "p", "u",
        move=MoveContext(MIGRATION, host1, OLD))
    sels = drv.select_destinations(request)[0]
    assert sels[0].root == host1
    assert inner.get_consumer(SERVER).allocations == {
        host1: {"VCPU": 4, "MEMORY_MB": 1024, "DISK_GB": 10}}
    assert inner.get_consumer(MIGRATION).allocations == {}
