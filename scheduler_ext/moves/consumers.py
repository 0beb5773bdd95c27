"""The placement consumers of one scheduling decision: the instance and,
for a move, its migration record, as read from placement."""

from __future__ import annotations

import dataclasses
from typing import Iterator

from scheduler_ext import errors
from scheduler_ext.moves.request import ScheduleRequest
from scheduler_ext.placement import (ConsumerAllocations, PlacementClient,
                                     WritableAllocations, allocations)

#: placement consumer types (microversion 1.38)
INSTANCE = "INSTANCE"
MIGRATION = "MIGRATION"

_EMPTY = ConsumerAllocations({})


@dataclasses.dataclass(frozen=True)
class Held:
    """What the instance and (for a move) its migration hold now."""

    instance_uuid: str
    instance: ConsumerAllocations
    migration_uuid: str | None = None
    migration: ConsumerAllocations = _EMPTY
    #: the instance was taken to hold nothing, not read (a move's instance:
    #: nova's conductor moved everything it held to the migration)
    guessed: bool = False

    def consumers(self) -> Iterator[tuple[str, str, ConsumerAllocations]]:
        """(consumer uuid, consumer type, what it holds) of each consumer."""
        yield self.instance_uuid, INSTANCE, self.instance
        if self.migration_uuid is not None:
            yield self.migration_uuid, MIGRATION, self.migration

    def old(self) -> WritableAllocations:
        """What the server holds now: the migration's allocations (nova's
        conductor moved them there) plus anything the instance holds."""
        return allocations.total(*(c.allocations for _, _, c in self.consumers()))


class GuessedWrong(errors.SchedulerExtError):
    """A move's instance, taken to hold nothing, holds allocations:
    placement refused the claim and nothing was written. ``now`` is what
    the consumers hold, read after the refusal: the decision is made
    again from it."""

    def __init__(self, instance: str, now: Held):
        super().__init__(f"instance {instance} holds allocations on "
                         f"{', '.join(sorted(now.instance.allocations))}")
        self.now = now


def start(client: PlacementClient, request: ScheduleRequest, instance: str) -> Held:
    """What the consumers hold as a decision starts, read only where
    nothing is known: the instance is taken to be a new consumer
    (generation null, holding nothing), as nova's own claim takes it for a
    boot and as nova's conductor leaves it for a move (it moves what the
    instance held to the migration); a move's migration is taken as the
    adapter read it when it found the move (``MoveContext.migration_held``).
    Every write made from this carries the consumer generations, so
    placement refuses it if a guess is wrong, and ``reread_unchanged``
    then reads them. Without ``migration_held`` both are read."""
    move = request.move
    if move is None:
        return Held(instance, _EMPTY)
    if move.migration_held is None:
        return read(client, request, instance)
    return Held(instance, _EMPTY, move.migration_uuid, move.migration_held,
                guessed=True)


def read(client: PlacementClient, request: ScheduleRequest, instance: str) -> Held:
    """Read the instance's (and the move's migration's) allocations."""
    held = client.get_consumer(instance)
    if request.move is None:
        return Held(instance, held)
    migration = request.move.migration_uuid
    return Held(instance, held, migration, client.get_consumer(migration))


def reread_unchanged(client: PlacementClient, request: ScheduleRequest,
                     instance: str, before: Held) -> Held:
    """Re-read the consumers after a consumer-generation conflict: the new
    generations when every consumer still holds what ``before`` held
    (a write that changed nothing we computed from), else ConcurrentUpdate
    naming the instance: the writes were computed from allocations that
    are gone (nova's conductor moved them back, for instance), so retrying
    them would write stale contents. A boot's instance found holding
    allocations raises ConsumerExists (nova evacuates that way); a move's
    instance guessed empty and found holding allocations, its migration
    unchanged, raises GuessedWrong (the decision is made again from the
    read)."""
    now = read(client, request, instance)
    if request.move is None and now.instance.allocations:
        raise errors.ConsumerExists(
            f"instance {instance} already holds allocations on "
            f"{', '.join(sorted(now.instance.allocations))}; a boot claims "
            "for a new consumer; nothing was written")
    changed = [consumer for (consumer, _, was), (_, _, cur)
               in zip(before.consumers(), now.consumers())
               if allocations.copy(was.allocations) != allocations.copy(cur.allocations)]
    if changed == [instance] and before.guessed:
        raise GuessedWrong(instance, now)
    if changed:
        raise errors.ConcurrentUpdate(
            f"instance {instance}: the allocations of {', '.join(changed)} "
            "changed while scheduling; nothing was written"
            + move_text(request))
    return now


def move_text(request: ScheduleRequest) -> str:
    """`` for migration M from S (same host allowed)``, or "" for a boot:
    the tail of an error message."""
    move = request.move
    if move is None:
        return ""
    return (f" for migration {move.migration_uuid} from {move.source_root}"
            f" (same host {'allowed' if move.allow_same_host else 'not allowed'})")
