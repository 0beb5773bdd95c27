"""A boot claims for a new consumer without reading it first (as nova's own
claim does); an instance that already holds allocations (nova evacuates
that way) is found by placement's refusal, and nothing is written."""

import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.lab import invariants
from scheduler_ext.moves.request import ScheduleRequest
from scheduler_ext.placement import AllocationWrite, EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest
from tests.unit.helpers import small_host, start

FLAVOR = {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10}
EVACUEE = str(uuid.UUID(int=201))
NEWCOMER = str(uuid.UUID(int=202))


class CountingReads:
    """Delegates to ``inner``; counts consumer reads made before the first
    allocation write."""

    def __init__(self, inner):
        self.inner = inner
        self.reads_before_write = 0
        self.writes = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def get_consumer(self, consumer):
        if not self.writes:
            self.reads_before_write += 1
        return self.inner.get_consumer(consumer)

    def post_allocations(self, writes):
        self.writes += 1
        return self.inner.post_allocations(writes)


def boot(*instances):
    return ScheduleRequest(tuple(instances), CandidateRequest(FLAVOR), "p", "u")


def test_a_boot_reads_no_consumer_before_its_claim():
    inner = EmbeddedPlacement()
    host1 = small_host(inner, "host1")
    client = CountingReads(inner)
    drv, _ = start(client)
    sels = drv.select_destinations(boot(NEWCOMER))[0]
    assert sels[0].root == host1
    assert client.reads_before_write == 0
    assert client.writes == 1
    assert inner.get_consumer(NEWCOMER).allocations == {host1: FLAVOR}


@pytest.mark.parametrize("instances", [(EVACUEE,), (NEWCOMER, EVACUEE)])
def test_a_boot_of_an_instance_holding_allocations_writes_nothing(instances):
    inner = EmbeddedPlacement()
    source = small_host(inner, "source")
    others = [small_host(inner, f"host{i}") for i in range(3)]
    inner.put_allocations(EVACUEE, AllocationWrite(
        {source: FLAVOR}, "p", "u", None, "INSTANCE"))
    before = {rp: inner.get_usages(rp) for rp in [source, *others]}
    drv, _ = start(inner)
    with pytest.raises(errors.ConsumerExists, match=f"{EVACUEE} already holds"):
        drv.select_destinations(boot(*instances))
    assert inner.get_consumer(EVACUEE).allocations == {source: FLAVOR}
    # the first instance of a multi-create was released again
    assert inner.get_consumer(NEWCOMER).allocations == {}
    assert {rp: inner.get_usages(rp) for rp in before} == before
    assert invariants.check_providers(inner) == []
