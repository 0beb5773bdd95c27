"""Move strategies: the allocation state machine of a claim.

A strategy turns a ScheduleRequest into claimed allocations and a list of
candidates (claimed host first, then alternates). Every claim is ONE
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

The same-host candidate is always on the providers the server holds
(``engine.pinned``), whichever source answered, and the old allocations
are only ever treated as free in the source's view: nothing is released
in placement before the claim.

Devices are the exception (``engine.pinned.whole_devices``: a PCI device
nova's compute assigns whole to one server, a pGPU's vGPUs). The old and
new flavors never share one (nova attaches the new devices, or creates
the new mediated devices, while the old stay assigned), and only a
migration holding the old ones lets confirm free them and revert free the
new ones. So when the old allocations or the same-host candidate use a
device (``MoveCandidates.beside_old``), the same host is taken as nova
takes it: the new flavor beside the old (``MoveCandidates.held_source``),
written as for another host.
"""

from __future__ import annotations

import collections
from typing import Sequence

from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.moves import consumers
from scheduler_ext.moves.consumers import Held
from scheduler_ext.moves.request import ScheduleRequest
from scheduler_ext.placement import (AllocationWrite, Allocations,
                                     PlacementClient, allocations)
from scheduler_ext.sources.base import (Candidate, CandidateSource, FleetUpkeep,
                                        Inserted, Ranking, RankedSource)

LOG = logging.getLogger(__name__)


class SameHostMoveStrategy:
    """Release the old allocations from the capacity view, choose, claim.

    ``releases_old``: a move's old allocations count as free on the source
    while choosing (the sources' ``released``); False gives nova's stock
    behaviour (see StockMoveStrategy).
    """

    releases_old = True

    def __init__(self, client: PlacementClient, source: CandidateSource,
                 upkeep: FleetUpkeep, *, max_alternates: int = 2,
                 max_claim_attempts: int = 3, prefer_same_host: bool = False):
        self.client = client
        self.source = source
        #: told of every write and refused claim, asked to recheck
        self.upkeep = upkeep
        #: claims tried, conflicts met, hosts claimed (for the benchmarks)
        self.stats: collections.Counter = collections.Counter()
        self.max_alternates = max_alternates
        self.max_claim_attempts = max_claim_attempts
        self.prefer_same_host = prefer_same_host

    # ------------------------------------------------------------- public
    def select(self, request: ScheduleRequest, max_alternates: int | None = None,
               ranking: Ranking | None = None) -> list[list[Candidate]]:
        """Claim a host for every instance of the request; returns, per
        instance, the claimed Candidate then up to ``max_alternates``
        alternates (default: ``self.max_alternates``). ``ranking``, when
        given, filters and orders the candidates for this call only.

        On NoValidHost for any instance, the boots already claimed for this
        request are released again, so the request leaves nothing behind.
        """
        alts = self.max_alternates if max_alternates is None else max_alternates
        source = self.source if ranking is None else RankedSource(self.source, ranking)
        if request.move is not None:
            return [self._place(source, request, request.instance_uuids[0], alts)]
        done: list[str] = []
        out = []
        try:
            for instance in request.instance_uuids:
                out.append(self._place(source, request, instance, alts))
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
            self.upkeep.changed(current.allocations)

    def _place(self, source: CandidateSource, request: ScheduleRequest,
               instance: str, alts: int) -> list[Candidate]:
        held = consumers.start(self.client, request, instance)
        try:
            return self._place_from(source, request, instance, held, alts)
        except consumers.GuessedWrong as wrong:
            LOG.info("%s: deciding again from what placement holds", wrong)
            return self._place_from(source, request, instance, wrong.now, alts)

    def _place_from(self, source: CandidateSource, request: ScheduleRequest,
                    instance: str, held: Held, alts: int) -> list[Candidate]:
        move = request.move
        limit = self.max_claim_attempts + alts + 1
        old = held.old()
        if move is not None and old and move.source_root not in old:
            LOG.warning("instance %s: old allocations %s are not on the "
                        "source %s", instance, sorted(old), move.source_root)
        # a move's view treats the old allocations as free for the source
        released = old if move is not None and self.releases_old and old else None
        return self.claim_best(source, request, instance, held, old, released,
                               limit, alts)

    def claim_best(self, source: CandidateSource, request: ScheduleRequest,
                   instance: str, held: Held, old: Allocations,
                   released: Allocations | None, limit: int,
                   alts: int) -> list[Candidate]:
        """Claim the first candidate that placement accepts. ``held`` is
        what the instance (and its migration) hold now, ``old`` the
        server's old allocations (what a move keeps on the migration when
        it goes elsewhere), ``released`` what the view may treat as free on
        the source."""
        choices, pool, apart = self._choices(source, request, released, limit)
        if not choices and self.upkeep.recheck(request.query, limit,
                                               _recheck_also(request, released)):
            choices, pool, apart = self._choices(source, request, released,
                                                 limit)
        if not choices:
            raise errors.NoValidHost(
                f"instance {instance}: no host fits {dict(request.resources)}"
                + consumers.move_text(request))
        failures: list[str] = []
        pos = 0     # the candidate tried (candidates may be built when read)
        while pos < len(choices) and len(failures) < self.max_claim_attempts:
            cand = choices[pos]
            writes = self._writes(request, instance, held, old, cand, apart)
            self.stats["claims"] += 1
            try:
                self.client.post_allocations(writes)
            except errors.Conflict as exc:
                self.stats["conflicts"] += 1
                failures.append(f"{cand.root}: {exc.detail}")
                self.upkeep.changed(cand.allocations)
                if isinstance(exc, errors.ConcurrentUpdate):
                    # a consumer was written in between: retry the same
                    # host only if what we computed from is unchanged
                    held = consumers.reread_unchanged(
                        self.client, request, instance, held)
                else:
                    pos += 1
                continue
            self.upkeep.wrote(held.old(), allocations.total(
                *(w.allocations for w in writes.values())))
            self.stats["claimed"] += 1
            LOG.info("instance %s: claimed %s on %s", instance,
                     dict(request.resources), cand.root)
            return [_read_now(cand)] + _alternates(cand, pool, alts)
        raise errors.NoValidHost(
            f"instance {instance}: every claim failed ({'; '.join(failures)})"
            + consumers.move_text(request))

    def _choices(self, source: CandidateSource, request: ScheduleRequest,
                 released: Allocations | None, limit: int
                 ) -> tuple[Sequence[Candidate], Sequence[Candidate], bool]:
        """(candidates to claim, best first; alternates pool; whether a
        same-host pick keeps the old allocations apart, on the migration)."""
        move = request.move
        if move is None:
            cands = source.candidates(request.query, limit=limit + 1)
            return cands, cands, False
        view = source.move_candidates(
            request.query, limit=limit, source=move.source_root, released=released)
        others = view.others
        # alternates are claimed by nova's conductor with the old
        # allocations held again: the source only if it fits beside them
        pool = (Inserted(others, view.held_source)
                if view.held_source and move.allow_same_host else others)
        same = view.same_host if move.allow_same_host else None
        apart = not self.releases_old or view.beside_old
        if view.beside_old and move.allow_same_host:
            # a device is never shared by the old and new flavors: the
            # source only with the new flavor beside the old, as nova does
            same = view.held_source
        if same is None:
            return others, pool, apart
        return Inserted(others, same, ahead=True,
                        front=self.prefer_same_host), pool, apart

    def _writes(self, request: ScheduleRequest, instance: str, held: Held,
                old: Allocations, cand: Candidate, apart: bool
                ) -> dict[str, AllocationWrite]:
        """The one write claiming ``cand`` (see the module's table);
        ``apart``: a same-host pick too leaves the old allocations on the
        migration."""
        move = request.move
        owner = dict(project_id=request.project_id, user_id=request.user_id)
        if move is None:
            return {instance: held.instance.write(
                cand.allocations, consumer_type=consumers.INSTANCE, **owner)}
        if cand.root == move.source_root and not apart:
            target_inst = allocations.per_class_max(old, cand.allocations)
            target_mig: Allocations = {}
        else:
            target_inst, target_mig = allocations.copy(cand.allocations), old
        writes = {instance: held.instance.write(
            target_inst, consumer_type=consumers.INSTANCE, **owner)}
        mig = held.migration
        if target_mig or mig.generation is not None:
            # an empty write for a consumer placement does not know would
            # leave an empty consumer record behind: skip it
            writes[move.migration_uuid] = mig.write(
                target_mig, consumer_type=consumers.MIGRATION, **owner)
        return writes


def _alternates(chosen: Candidate, pool: Sequence[Candidate],
                alts: int) -> list[Candidate]:
    seen = {chosen.root}
    out: list[Candidate] = []
    for cand in pool:
        if len(out) >= alts:
            break
        if cand.root not in seen:
            seen.add(cand.root)
            out.append(_read_now(cand))
    return out


def _read_now(cand: Candidate) -> Candidate:
    """``cand`` as a plain Candidate, its allocations and mappings read
    now: the answer keeps no lazily built candidate, nor the batch
    behind it."""
    return Candidate(cand.root, cand.allocations, cand.weight, cand.mappings)


class StockMoveStrategy(SameHostMoveStrategy):
    """Nova's own behaviour, modelled for comparison: the old allocations
    count against the source while choosing, and a same-host pick claims the
    new flavor on top of them."""

    releases_old = False


def _recheck_also(request: ScheduleRequest,
                  released: Allocations | None) -> list[str]:
    """What a recheck re-reads besides placement's candidates: a move's
    source and the providers of its old allocations."""
    if request.move is None:
        return []
    return [request.move.source_root, *(released or ())]
