"""A claim reads only the consumers nothing is known of: a boot claims for a
new consumer without reading it first (as nova's own claim does), and a
move takes its instance as holding nothing (nova's conductor moved what it
held to the migration) and reuses the read of its migration consumer that
found the move. A wrong guess is found by placement's refusal and nothing
is written: an instance that already holds allocations raises
ConsumerExists for a boot (nova evacuates that way) and has the move
decided again from what it holds; a migration written since it was read is
read again."""

import dataclasses
import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.lab import invariants
from scheduler_ext.moves.request import MoveContext, ScheduleRequest
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest
from tests.unit.helpers import small_host, start

FLAVOR = {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10}
EVACUEE = str(uuid.UUID(int=201))
NEWCOMER = str(uuid.UUID(int=202))
MIGRATION = str(uuid.UUID(int=203))
BIGGER = {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}


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

    def get_provider(self, rp):
        if not self.writes:
            self.reads_before_write += 1
        return self.inner.get_provider(rp)

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


def resize(inner, source, migration_held):
    return ScheduleRequest((EVACUEE,), CandidateRequest(BIGGER), "p", "u",
                           move=MoveContext(MIGRATION, source, FLAVOR,
                                            migration_held=migration_held))


def moved_to_migration(inner):
    source = small_host(inner, "source")
    inner.put_allocations(MIGRATION, AllocationWrite(
        {source: FLAVOR}, "p", "u", None, "MIGRATION"))
    return source


def assert_resized_in_place(inner, source, sels):
    assert sels[0].root == source
    assert inner.get_consumer(EVACUEE).allocations == {source: BIGGER}
    assert inner.get_consumer(MIGRATION).allocations == {}


def test_a_move_reuses_the_migration_read_that_found_it():
    inner = EmbeddedPlacement()
    source = moved_to_migration(inner)
    client = CountingReads(inner)
    drv, _ = start(client)
    sels = drv.select_destinations(resize(inner, source, inner.get_consumer(MIGRATION)))[0]
    # neither the instance, nor the source (the migration's read names it)
    assert client.reads_before_write == 0
    assert_resized_in_place(inner, source, sels)


def test_a_move_found_without_its_migration_read_reads_both():
    inner = EmbeddedPlacement()
    source = moved_to_migration(inner)
    client = CountingReads(inner)
    drv, _ = start(client)
    sels = drv.select_destinations(resize(inner, source, None))[0]
    assert client.reads_before_write == 3     # source, instance, migration
    assert_resized_in_place(inner, source, sels)


@pytest.mark.parametrize("same_host", [True, False])
def test_a_move_whose_instance_still_holds_allocations_is_decided_again(same_host):
    inner = EmbeddedPlacement()
    source = moved_to_migration(inner)
    other = small_host(inner, "other")
    # the instance kept allocations of its own (not nova's flow)
    kept = {"VCPU": 1, "MEMORY_MB": 512}
    inner.put_allocations(EVACUEE, AllocationWrite(
        {source: kept}, "p", "u", None, "INSTANCE"))
    drv, _ = start(inner)
    request = resize(inner, source, inner.get_consumer(MIGRATION))
    request = dataclasses.replace(request, move=dataclasses.replace(
        request.move, allow_same_host=same_host))
    sels = drv.select_destinations(request)[0]
    assert drv.strategy.stats["conflicts"] == 1   # refused, read, decided again
    if same_host:
        assert sels[0].root == source
        # per class the larger of the new flavor and all that was held
        # (migration and instance), as for any same-host resize
        old = {rc: FLAVOR[rc] + kept.get(rc, 0) for rc in FLAVOR}
        assert inner.get_consumer(EVACUEE).allocations == {
            source: {rc: max(old[rc], BIGGER[rc]) for rc in FLAVOR}}
        assert inner.get_consumer(MIGRATION).allocations == {}
    else:
        assert sels[0].root == other
        assert inner.get_consumer(EVACUEE).allocations == {other: BIGGER}
        # what the instance held joined the migration's: nothing lost
        assert inner.get_consumer(MIGRATION).allocations == {source: {
            rc: FLAVOR[rc] + kept.get(rc, 0) for rc in FLAVOR}}
    assert invariants.check_providers(inner) == []


def test_a_migration_rewritten_since_its_read_is_read_again():
    inner = EmbeddedPlacement()
    source = moved_to_migration(inner)
    found = inner.get_consumer(MIGRATION)
    inner.put_allocations(MIGRATION, found.write(   # same contents, new generation
        found.allocations, consumer_type="MIGRATION", project_id="p", user_id="u"))
    drv, _ = start(inner)
    sels = drv.select_destinations(resize(inner, source, found))[0]
    assert drv.strategy.stats["conflicts"] == 1   # refused, read, retried
    assert_resized_in_place(inner, source, sels)


def test_a_migration_emptied_since_its_read_writes_nothing():
    inner = EmbeddedPlacement()
    source = moved_to_migration(inner)
    found = inner.get_consumer(MIGRATION)
    # nova's conductor gave up the move: the old flavor is back on the instance
    inner.post_allocations({
        MIGRATION: found.write({}, consumer_type="MIGRATION"),
        EVACUEE: AllocationWrite({source: FLAVOR}, "p", "u", None, "INSTANCE")})
    drv, _ = start(inner)
    with pytest.raises(errors.ConcurrentUpdate, match="changed while scheduling"):
        drv.select_destinations(resize(inner, source, found))
    assert inner.get_consumer(EVACUEE).allocations == {source: FLAVOR}
    assert inner.get_consumer(MIGRATION).allocations == {}
    assert invariants.check_providers(inner) == []
