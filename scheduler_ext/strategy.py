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
        self.max_alternates = max_alternates
        self.max_claim_attempts = max_claim_attempts
        self.prefer_same_host = prefer_same_host

    # ------------------------------------------------------------- public
    def select(self, request: ScheduleRequest) -> list[list[Selection]]:
        """Claim a host for every instance of the request; returns, per
        instance, the claimed Selection then its alternates.

        On NoValidHost for any instance, the boots already claimed for this
        request are released again, so the request leaves nothing behind.
        """
        if request.move is not None:
            return [self._place(request, request.instance_uuids[0])]
        done: list[str] = []
        out = []
        try:
            for instance in request.instance_uuids:
                out.append(self._place(request, instance))
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

    def _place(self, request: ScheduleRequest, instance: str) -> list[Selection]:
        move = request.move
        limit = self.max_claim_attempts + self.max_alternates + 1
        held = self._read(request, instance)
        old = self._old(held)
        if move is not None and not any(
                rp == move.source_root for rp in old) and old:
            LOG.warning("instance %s: old allocations %s are not on the "
                        "source %s", instance, sorted(old), move.source_root)
        choices, pool = self._choices(request, old, limit)
        if not choices:
            raise errors.NoValidHost(
                f"instance {instance}: no host fits {dict(request.resources)}"
                + self._move_text(request))
        failures = []
        for cand in choices[:self.max_claim_attempts]:
            writes = self._writes(request, instance, held, cand)
            try:
                self.client.post_allocations(writes)
            except errors.Conflict as exc:
                failures.append(f"{cand.root}: {exc.detail}")
                self.source.changed(cand.allocations)
                if isinstance(exc, errors.ConcurrentUpdate):
                    held = self._read(request, instance)
                continue
            self.source.changed(list(cand.allocations) + list(old))
            LOG.info("instance %s: claimed %s on %s", instance,
                     dict(request.resources), cand.root)
            return [Selection(cand.root, cand.allocations)] + \
                self._alternates(cand, pool)
        raise errors.NoValidHost(
            f"instance {instance}: every claim failed ({'; '.join(failures)})"
            + self._move_text(request))

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

    def _choices(self, request: ScheduleRequest, old: Allocations,
                 limit: int) -> tuple[list[Candidate], list[Candidate]]:
        """(candidates to claim, best first; alternates pool)."""
        move = request.move
        if move is None:
            cands = self.source.candidates(request, limit=limit + 1)
            return cands, cands
        view = self.source.move_candidates(
            request, limit=limit, source=move.source_root,
            released=old if self.release else None)
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
                cand: Candidate) -> dict[str, AllocationWrite]:
        move = request.move
        inst = held["instance"]
        if move is None:
            return {instance: inst.write(
                cand.allocations, consumer_type=INSTANCE,
                project_id=request.project_id, user_id=request.user_id)}
        mig = held["migration"]
        old = self._old(held)
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

    def _alternates(self, chosen: Candidate, pool: list[Candidate]) -> list[Selection]:
        seen = {chosen.root}
        out = []
        for cand in pool:
            if len(out) >= self.max_alternates:
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
