"""Move strategies: the allocation state machine of a claim.

A strategy turns a ScheduleRequest into claimed allocations and a list of
Selections (claimed host first, then alternates). Every claim is ONE
multi-consumer write with consumer generations, so placement is always
either as before or as completed; there is no window in which another
scheduler can take the space a move needs.

What each consumer holds (see README "Move allocations" for the full table):

====================  ===============================  ======================
pick                  instance                         migration
====================  ===============================  ======================
boot                  flavor on the chosen providers   -
same host (resize)    per-class max(old, new) on the   nothing
                      source providers
other host            new flavor on the destination    old flavor on every
                                                       source provider
                                                       (sharing ones too)
====================  ===============================  ======================

Nova then finishes the move without us: confirm deletes the migration's
allocations, revert moves them back onto the instance (and does nothing if
the migration holds none). After a same-host pick both leave the instance
with max(old, new), and ``reconcile`` trims it to the live flavor: a
decrease, which always fits.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Iterable, Mapping, Protocol

from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.placement import (AllocationWrite, Allocations,
                                     PlacementClient, add_allocations)
from scheduler_ext.request import ScheduleRequest

LOG = logging.getLogger(__name__)

MIGRATION = "MIGRATION"
INSTANCE = "INSTANCE"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One way to place the request: the root (compute node) provider, the
    amounts per provider (sharing providers included) and its weight
    (higher is better)."""

    root: str
    allocations: Mapping[str, Mapping[str, int]]
    weight: float = 0.0


@dataclasses.dataclass(frozen=True)
class Selection:
    """A host for one instance: claimed (first in the list) or alternate.

    ``allocation_request`` is placement's allocation-request JSON, what
    nova's conductor claims for the instance if it reschedules here.
    """

    root: str
    allocations: Mapping[str, Mapping[str, int]]

    @property
    def allocation_request(self) -> dict:
        return {"allocations": {rp: {"resources": dict(res)}
                                for rp, res in self.allocations.items()}}


@dataclasses.dataclass(frozen=True)
class MoveCandidates:
    """The candidates of a move, all weighed against one view.

    ``same_host``: the source host, with the old allocations released (its
    real free space), or None if it does not fit even then. ``others``:
    other hosts that fit with the old allocations still held (they stay
    held while the move runs), best first. ``held_source``: the source host
    if the new flavor fits beside the old one (what nova's conductor can
    claim on a reschedule), else None.
    """

    same_host: Candidate | None
    others: list[Candidate]
    held_source: Candidate | None


class CandidateSource(Protocol):
    """Where candidates come from (the numpy engine, or placement)."""

    def candidates(self, request: ScheduleRequest, *,
                   limit: int) -> list[Candidate]:
        """The best ``limit`` candidates for a boot, best first."""

    def move_candidates(self, request: ScheduleRequest, *, limit: int,
                        source: str, released: Allocations | None) -> MoveCandidates:
        """Candidates of a move from ``source``; ``released`` (the old
        allocations) are treated as free for the source host only."""

    def changed(self, providers: Iterable[str]) -> None:
        """The allocations on these providers were (maybe) written."""

    #: True when ``move_candidates`` can treat ``released`` as free without
    #: writing to placement (the engine); False when placement must really
    #: release them first (candidates from placement itself).
    virtual_release: bool


def max_allocations(a: Allocations, b: Allocations) -> dict[str, dict[str, int]]:
    """Per (provider, class) maximum of two allocation sets."""
    out = {rp: dict(res) for rp, res in a.items()}
    for rp, res in b.items():
        row = out.setdefault(rp, {})
        for rc, n in res.items():
            row[rc] = max(row.get(rc, 0), n)
    return out


def copy_allocations(a: Allocations) -> dict[str, dict[str, int]]:
    return {rp: dict(res) for rp, res in a.items()}


class SameHostMoveStrategy:
    """Release the old allocations from the capacity view, choose, claim.

    ``release`` False gives nova's stock behaviour (see StockMoveStrategy).
    """

    release = True

    def __init__(self, client: PlacementClient, source: CandidateSource, *,
                 max_alternates: int = 2, max_claim_attempts: int = 3,
                 prefer_same_host: bool = False):
        self.client = client
        self.source = source
        #: claims tried, conflicts met, hosts claimed (for the benchmarks)
        self.stats: collections.Counter = collections.Counter()
        self.max_alternates = max_alternates
        self.max_claim_attempts = max_claim_attempts
        self.prefer_same_host = prefer_same_host

    # ------------------------------------------------------------- public
    def select(self, request: ScheduleRequest,
               max_alternates: int | None = None) -> list[list[Selection]]:
        """Claim a host for every instance of the request; returns, per
        instance, the claimed Selection then up to ``max_alternates``
        alternates (default: the configured number).

        On NoValidHost for any instance, the boots already claimed for this
        request are released again, so the request leaves nothing behind.
        """
        alts = self.max_alternates if max_alternates is None else max_alternates
        if request.move is not None:
            return [self._place(request, request.instance_uuids[0], alts)]
        done: list[str] = []
        out = []
        try:
            for instance in request.instance_uuids:
                out.append(self._place(request, instance, alts))
                done.append(instance)
        except errors.SchedulerExtError:
            for instance in done:
                self._undo_boot(instance)
            raise
        return out

    # ----------------------------------------------------------- internals
    def _undo_boot(self, instance: str) -> None:
        current = self.client.get_consumer(instance)
        if current.allocations:
            self.client.put_allocations(instance, current.write({}))
            self.source.changed(current.allocations)

    def _place(self, request: ScheduleRequest, instance: str,
               alts: int) -> list[Selection]:
        move = request.move
        limit = self.max_claim_attempts + alts + 1
        held = self._read(request, instance)
        old = self._old(held)
        if move is not None and old and move.source_root not in old:
            LOG.warning("instance %s: old allocations %s are not on the "
                        "source %s", instance, sorted(old), move.source_root)
        real_release = (move is not None and move.allow_same_host and
                        self.release and bool(old) and
                        not self.source.virtual_release)
        before = held
        if real_release:
            held = self._release(request, instance, held)
        # what the view may treat as free for the source host
        released = old if self.release and (
            self.source.virtual_release or real_release) else None
        try:
            return self._claim_best(request, instance, held, old, released,
                                    limit, alts)
        except errors.SchedulerExtError as exc:
            if not real_release:
                raise
            try:
                self._restore(request, instance, before)
            except errors.SchedulerExtError:
                # the window was lost: the source's space is gone; cover the
                # instance on another host rather than nowhere
                return self._claim_uncovered(request, instance, limit, exc)
            raise

    def _claim_best(self, request: ScheduleRequest, instance: str, held: dict,
                    old: Allocations, released: Allocations | None,
                    limit: int, alts: int) -> list[Selection]:
        """Claim the first candidate that placement accepts."""
        choices, pool = self._choices(request, released, limit)
        if not choices:
            raise errors.NoValidHost(
                f"instance {instance}: no host fits {dict(request.resources)}"
                + self._move_text(request))
        failures = []
        for cand in choices[:self.max_claim_attempts]:
            writes = self._writes(request, instance, held, old, cand)
            self.stats["claims"] += 1
            try:
                self.client.post_allocations(writes)
            except errors.Conflict as exc:
                self.stats["conflicts"] += 1
                failures.append(f"{cand.root}: {exc.detail}")
                self.source.changed(cand.allocations)
                if isinstance(exc, errors.ConcurrentUpdate):
                    held = self._read(request, instance)
                continue
            self.source.changed(list(cand.allocations) + list(old))
            self.stats["claimed"] += 1
            LOG.info("instance %s: claimed %s on %s", instance,
                     dict(request.resources), cand.root)
            return [Selection(cand.root, cand.allocations)] + \
                self._alternates(cand, pool, alts)
        raise errors.NoValidHost(
            f"instance {instance}: every claim failed ({'; '.join(failures)})"
            + self._move_text(request))

    # When candidates come from placement itself (the engine cannot model
    # the fleet), placement cannot be asked "as if the old flavor were
    # free": the release has to be real. From the release write until the
    # claim (or the restore) is written, a concurrent boot may take the
    # source's space; the claim then fails and the next candidate, the
    # alternates, and finally the restore are tried.
    def _release(self, request: ScheduleRequest, instance: str, held: dict) -> dict:
        writes = {self._consumer(request, instance, who): c.write(
                      {}, consumer_type=self._type(who))
                  for who, c in held.items() if c.allocations}
        self.client.post_allocations(writes)
        LOG.info("instance %s: released %s for scheduling", instance,
                 self._old(held))
        return self._read(request, instance)

    def _claim_uncovered(self, request: ScheduleRequest, instance: str,
                         limit: int, cause: Exception) -> list[Selection]:
        """Last resort after a lost release window: claim the new flavor on
        another host with the migration holding nothing (a later revert is
        then not covered on the source; reconcile restores it when room
        appears). Raises an error naming the instance if even that fails."""
        held = self._read(request, instance)
        view = self.source.move_candidates(request, limit=limit,
                                           source=request.move.source_root,
                                           released=None)
        for cand in view.others[:self.max_claim_attempts]:
            try:
                self.client.post_allocations({instance: held["instance"].write(
                    copy_allocations(cand.allocations), consumer_type=INSTANCE,
                    project_id=request.project_id, user_id=request.user_id)})
            except errors.Conflict:
                continue
            LOG.error("instance %s: the source %s was taken while its old "
                      "allocations were released; it moves to %s with "
                      "migration %s holding nothing, so a revert is not "
                      "covered until reconcile restores the source",
                      instance, request.move.source_root, cand.root,
                      request.move.migration_uuid)
            return [Selection(cand.root, cand.allocations)]
        raise errors.SchedulerExtError(
            f"instance {instance}: its old allocations were released for "
            f"scheduling, could not be restored, and no host could be "
            f"claimed ({cause}); the instance is not covered in placement "
            "until reconcile restores it")

    def _restore(self, request: ScheduleRequest, instance: str,
                 before: dict) -> None:
        """Put the released allocations back where they were (the migration,
        where nova's conductor moved them, and the instance if it held any),
        in one write; an error names the instance."""
        now = self._read(request, instance)
        writes = {self._consumer(request, instance, who): now[who].write(
                      copy_allocations(c.allocations), consumer_type=self._type(who),
                      project_id=request.project_id, user_id=request.user_id)
                  for who, c in before.items() if c.allocations}
        try:
            self.client.post_allocations(writes)
        except errors.PlacementError as exc:
            raise errors.SchedulerExtError(
                f"instance {instance}: its old allocations "
                f"{self._old(before)} were released for scheduling and could "
                f"not be restored ({exc}); the instance is not covered in "
                "placement until reconcile restores them") from exc

    @staticmethod
    def _consumer(request: ScheduleRequest, instance: str, who: str) -> str:
        return instance if who == "instance" else request.move.migration_uuid

    @staticmethod
    def _type(who: str) -> str:
        return INSTANCE if who == "instance" else MIGRATION

    @staticmethod
    def _move_text(request: ScheduleRequest) -> str:
        move = request.move
        if move is None:
            return ""
        return (f" for migration {move.migration_uuid} from {move.source_root}"
                f" (same host {'allowed' if move.allow_same_host else 'not allowed'})")

    def _read(self, request: ScheduleRequest, instance: str) -> dict:
        held = {"instance": self.client.get_consumer(instance)}
        if request.move is not None:
            held["migration"] = self.client.get_consumer(request.move.migration_uuid)
        return held

    @staticmethod
    def _old(held: dict) -> dict[str, dict[str, int]]:
        """What the server holds now: the migration's allocations (nova's
        conductor moved them there) plus anything the instance holds."""
        old: dict[str, dict[str, int]] = {}
        for consumer in held.values():
            add_allocations(old, consumer.allocations)
        return old

    def _choices(self, request: ScheduleRequest, released: Allocations | None,
                 limit: int) -> tuple[list[Candidate], list[Candidate]]:
        """(candidates to claim, best first; alternates pool)."""
        move = request.move
        if move is None:
            cands = self.source.candidates(request, limit=limit + 1)
            return cands, cands
        view = self.source.move_candidates(
            request, limit=limit, source=move.source_root, released=released)
        others = view.others
        # alternates are claimed by nova's conductor with the old
        # allocations held again: the source only if it fits beside them
        pool = sorted(others + ([view.held_source] if view.held_source
                                and move.allow_same_host else []),
                      key=lambda c: -c.weight)
        same = view.same_host if move.allow_same_host else None
        if same is None:
            return others, pool
        if self.prefer_same_host:
            return [same] + others, pool
        return sorted([same] + others, key=lambda c: -c.weight), pool

    def _writes(self, request: ScheduleRequest, instance: str, held: dict,
                old: Allocations, cand: Candidate) -> dict[str, AllocationWrite]:
        """The one write claiming ``cand`` (see the module's table)."""
        move = request.move
        inst = held["instance"]
        if move is None:
            return {instance: inst.write(
                cand.allocations, consumer_type=INSTANCE,
                project_id=request.project_id, user_id=request.user_id)}
        mig = held["migration"]
        if cand.root == move.source_root and self.release:
            target_inst, target_mig = max_allocations(old, cand.allocations), {}
        else:
            target_inst, target_mig = copy_allocations(cand.allocations), old
        writes = {instance: inst.write(
            target_inst, consumer_type=INSTANCE,
            project_id=request.project_id, user_id=request.user_id)}
        if target_mig or mig.generation is not None:
            # an empty write for a consumer placement does not know would
            # leave an empty consumer record behind: skip it
            writes[move.migration_uuid] = mig.write(
                target_mig, consumer_type=MIGRATION,
                project_id=request.project_id, user_id=request.user_id)
        return writes

    def _alternates(self, chosen: Candidate, pool: list[Candidate],
                    alts: int) -> list[Selection]:
        seen = {chosen.root}
        out = []
        for cand in pool:
            if len(out) >= alts:
                break
            if cand.root not in seen:
                seen.add(cand.root)
                out.append(Selection(cand.root, cand.allocations))
        return out


class StockMoveStrategy(SameHostMoveStrategy):
    """Nova's own behaviour, modelled for comparison: the old allocations
    count against the source while choosing, and a same-host pick claims the
    new flavor on top of them."""

    release = False
