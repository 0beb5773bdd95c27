"""The real-release path of a move: only for queries the engine cannot
model (``sources.base.RealReleaseNeeded``, or a source without a virtual
release).

The old allocations are really released (one write) before placement is
asked, so the order is: record the intent in the release journal
(``moves.journal``; no release without it), release, claim. Every
exception after the release, ours or not (keystoneauth errors, a body that
is not JSON, a dying thread), restores the old allocations where they were,
if the consumers still hold what the release left them (nothing); a write
by anyone else in between means the release was superseded and nothing is
restored over it. The journal entry goes once the claim or the restore is
written; a crash in between leaves it for ``ReleaseJournal.recover``. When
the restore itself fails after our own error (the source's space was taken
in the window), the new flavor is claimed elsewhere with the migration
holding nothing, as a last resort.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator

from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.moves import consumers
from scheduler_ext.moves.consumers import Held
from scheduler_ext.moves.journal import ReleaseJournal
from scheduler_ext.moves.request import ScheduleRequest, Selection
from scheduler_ext.placement import allocations
from scheduler_ext.sources.base import CandidateSource

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.moves.strategy import SameHostMoveStrategy

LOG = logging.getLogger(__name__)


def _innermost(source: Any) -> Any:
    while hasattr(source, "inner"):
        source = source.inner
    return source


@contextlib.contextmanager
def _really_released(source: CandidateSource, old) -> Iterator[None]:
    mode = getattr(_innermost(source), "really_released", None)
    if mode is None:
        yield
        return
    with mode(old):
        yield


def place_with_real_release(strategy: "SameHostMoveStrategy",
                            source: CandidateSource, request: ScheduleRequest,
                            instance: str, held: Held, limit: int,
                            alts: int) -> list[Selection]:
    """Journal, release what ``held`` holds, claim the best candidate; on
    any failure restore, or cover the instance elsewhere (module
    docstring)."""
    client = strategy.client
    journal: ReleaseJournal | None = getattr(strategy, "journal", None)
    if journal is None:
        raise errors.SchedulerExtError(
            f"instance {instance}: a real release needs the release journal "
            "([scheduler_ext] release_journal_dir); nothing was written")
    if held.guessed:   # what is released and restored must be read
        held = consumers.read(client, request, instance)
    old = held.old()
    assert held.migration_uuid is not None
    journal.record(held, request.project_id, request.user_id)
    writes = {consumer: c.write({}, consumer_type=ctype)
              for consumer, ctype, c in held.consumers() if c.allocations}
    try:
        client.post_allocations(writes)
    except errors.SchedulerExtError:
        journal.clear(held.migration_uuid)   # placement refused: not released
        raise
    LOG.info("instance %s: released %s for scheduling (journaled)",
             instance, old)
    try:
        now = consumers.read(client, request, instance)
        with _really_released(source, old):
            result = strategy.claim_best(source, request, instance, now, old,
                                         old, limit, alts)
    except BaseException as exc:
        return _after_failure(strategy, source, request, instance, held,
                              limit, exc)
    journal.clear(held.migration_uuid)
    return result


def _after_failure(strategy: "SameHostMoveStrategy", source: CandidateSource,
                   request: ScheduleRequest, instance: str, held: Held,
                   limit: int, exc: BaseException) -> list[Selection]:
    """Restore after ``exc``; re-raises it unless the last resort claimed
    a host."""
    journal: ReleaseJournal = getattr(strategy, "journal")
    assert held.migration_uuid is not None
    try:
        _restore(strategy, request, instance, held)
    except BaseException as restore_exc:
        LOG.error("instance %s: restore after %r failed: %s (the release "
                  "journal keeps it)", instance, exc, restore_exc)
        if isinstance(exc, errors.SchedulerExtError) and \
                isinstance(restore_exc, errors.SchedulerExtError):
            return _claim_uncovered(strategy, source, request, instance,
                                    limit, exc)
        raise exc
    journal.clear(held.migration_uuid)
    raise exc


def _restore(strategy: "SameHostMoveStrategy", request: ScheduleRequest,
             instance: str, before: Held) -> None:
    """Put the released allocations back where they were (the migration,
    where nova's conductor moved them, and the instance if it held any),
    in one write, if the consumers still hold nothing; an error names the
    instance."""
    now = consumers.read(strategy.client, request, instance)
    current = {consumer: c for consumer, _, c in now.consumers()}
    if any(c.allocations for c in current.values()):
        LOG.warning("instance %s: its consumers were written since the "
                    "release (%s); nothing restored over them", instance,
                    {k: allocations.copy(c.allocations)
                     for k, c in current.items()})
        return
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
            "placement until the release journal or reconcile restores "
            "them") from exc


def _claim_uncovered(strategy: "SameHostMoveStrategy", source: CandidateSource,
                     request: ScheduleRequest, instance: str, limit: int,
                     cause: BaseException) -> list[Selection]:
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
