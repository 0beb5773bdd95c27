"""The real-release path of a move, for candidates from placement itself.

Placement cannot be asked "as if the old flavor were free", so when the
candidates come from ``GET /allocation_candidates`` the old allocations are
really released (one write) before choosing. From that write until the
claim (or the restore) is written, a concurrent boot may take the source's
space; the claim then falls back to the next candidates and the
alternates, then the old allocations are restored where they were, and as
a last resort the new flavor is claimed elsewhere with the migration
holding nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.moves import consumers
from scheduler_ext.moves.consumers import Held
from scheduler_ext.moves.request import ScheduleRequest, Selection
from scheduler_ext.placement import allocations
from scheduler_ext.sources.base import CandidateSource

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.moves.strategy import SameHostMoveStrategy

LOG = logging.getLogger(__name__)


def place_with_real_release(strategy: "SameHostMoveStrategy",
                            source: CandidateSource, request: ScheduleRequest,
                            instance: str, held: Held, limit: int,
                            alts: int) -> list[Selection]:
    """Release what ``held`` holds, claim the best candidate; on failure
    restore, or cover the instance elsewhere (see the module docstring)."""
    client = strategy.client
    old = held.old()
    writes = {consumer: c.write({}, consumer_type=ctype)
              for consumer, ctype, c in held.consumers() if c.allocations}
    client.post_allocations(writes)
    LOG.info("instance %s: released %s for scheduling", instance, old)
    now = consumers.read(client, request, instance)
    try:
        return strategy.claim_best(source, request, instance, now, old, old,
                                   limit, alts)
    except errors.SchedulerExtError as exc:
        try:
            _restore(strategy, request, instance, held)
        except errors.SchedulerExtError:
            # the window was lost: the source's space is gone; cover the
            # instance on another host rather than nowhere
            return _claim_uncovered(strategy, source, request, instance,
                                    limit, exc)
        raise


def _restore(strategy: "SameHostMoveStrategy", request: ScheduleRequest,
             instance: str, before: Held) -> None:
    """Put the released allocations back where they were (the migration,
    where nova's conductor moved them, and the instance if it held any),
    in one write; an error names the instance."""
    now = consumers.read(strategy.client, request, instance)
    current = {consumer: c for consumer, _, c in now.consumers()}
    writes = {consumer: current[consumer].write(
                  allocations.copy(c.allocations), consumer_type=ctype,
                  project_id=request.project_id, user_id=request.user_id)
              for consumer, ctype, c in before.consumers() if c.allocations}
    try:
        strategy.client.post_allocations(writes)
    except errors.PlacementError as exc:
        raise errors.SchedulerExtError(
            f"instance {instance}: its old allocations "
            f"{before.old()} were released for scheduling and could "
            f"not be restored ({exc}); the instance is not covered in "
            "placement until reconcile restores them") from exc


def _claim_uncovered(strategy: "SameHostMoveStrategy", source: CandidateSource,
                     request: ScheduleRequest, instance: str, limit: int,
                     cause: Exception) -> list[Selection]:
    """Last resort after a lost release window: claim the new flavor on
    another host with the migration holding nothing (a later revert is
    then not covered on the source; reconcile restores it when room
    appears). Raises an error naming the instance if even that fails."""
    move = request.move
    assert move is not None
    held = consumers.read(strategy.client, request, instance)
    view = source.move_candidates(request.query, limit=limit,
                                  source=move.source_root, released=None)
    for cand in view.others[:strategy.max_claim_attempts]:
        try:
            strategy.client.post_allocations({instance: held.instance.write(
                allocations.copy(cand.allocations),
                consumer_type=consumers.INSTANCE,
                project_id=request.project_id, user_id=request.user_id)})
        except errors.Conflict:
            continue
        LOG.error("instance %s: the source %s was taken while its old "
                  "allocations were released; it moves to %s with "
                  "migration %s holding nothing, so a revert is not "
                  "covered until reconcile restores the source",
                  instance, move.source_root, cand.root, move.migration_uuid)
        return [Selection(cand.root, cand.allocations, cand.mappings)]
    raise errors.SchedulerExtError(
        f"instance {instance}: its old allocations were released for "
        f"scheduling, could not be restored, and no host could be "
        f"claimed ({cause}); the instance is not covered in placement "
        "until reconcile restores it")
