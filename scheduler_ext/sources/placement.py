"""Candidates from placement itself (``GET /allocation_candidates``).

For queries the numpy engine cannot answer exactly (it raises
Unsupported, see ``CapacityIndex``), placement answers.

Placement cannot be asked "as if these allocations were free", and nothing
is released to ask it. For a move the other hosts come from placement's
answer with the old allocations still held (they stay held while the move
runs). The source host is checked by the engine on a small index of the
providers that can serve it (the source and the providers of the old
allocations, read now; the rest of the source's tree and the sharing
providers of its aggregates when the query or the old allocations need
them), with the old allocations released and kept on the providers they
use (``engine.pinned``), as the engine source does: the source is offered
whatever ``placement_results_limit`` cuts from placement's answer.
Placement has accepted the query by then, so every name it uses exists.
Only a query beyond the engine itself (more than 64 required trait groups,
which placement on MySQL or SQLite cannot answer either) raises
Unsupported, before anything is written: the caller schedules it its own
way (nova's adapter: nova's scheduler).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import numpy as np
from oslo_config import cfg

from scheduler_ext import errors
from scheduler_ext.engine.index import CapacityIndex, request_names
from scheduler_ext.engine.pinned import Pinned, pinned, whole_devices
from scheduler_ext.engine.weigh import DEFAULT_WEIGHING, Weighing
from scheduler_ext.placement import (SHARING_TRAIT, Allocations,
                                     CandidatesEndpoint, PlacementClient,
                                     allocations)
from scheduler_ext.placement.client import read_listed_providers, read_provider
from scheduler_ext.placement.model import (ConsumerAllocations, FleetSnapshot,
                                           ProviderRecord)
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.sources.base import (Candidate, CandidateSource, FleetUpkeep,
                                        MoveCandidates, SourcePlugin)


class PlacementCandidateSource:
    """``CandidateSource`` asking placement for every decision; its
    candidates are ordered by ``weighing.weigher`` (``host_subset_size``
    is not applied here)."""

    def __init__(self, client: PlacementClient, conf: cfg.ConfigOpts,
                 weighing: Weighing = DEFAULT_WEIGHING):
        if not isinstance(client, CandidatesEndpoint):
            raise errors.Unsupported(
                f"{type(client).__name__} has no allocation candidates "
                "endpoint; the 'placement' engine needs a placement service")
        opts = conf.scheduler_ext
        self.client = client
        self.single_precision = opts.allocation_ratio_storage == "single"
        self.results = opts.placement_results_limit
        self.weigher = weighing.weigher

    @classmethod
    def build(cls, client: PlacementClient, conf: cfg.ConfigOpts,
              weighing: Weighing = DEFAULT_WEIGHING
              ) -> tuple["PlacementUpkeep", "PlacementCandidateSource"]:
        """The source and its upkeep (which keeps nothing: see
        ``PlacementUpkeep``)."""
        source = cls(client, conf, weighing)
        return PlacementUpkeep(client), source

    def _ask(self, query: CandidateRequest) -> tuple[list[Candidate], dict]:
        params = query.replace(limit=self.results).to_query()
        answer = self.client.allocation_candidates(params)
        summaries = answer["provider_summaries"]
        cands = [Candidate(_root(req, summaries), allocations.from_request(req),
                           mappings=req.get("mappings"))
                 for req in answer["allocation_requests"]]
        return cands, summaries

    def _weighed(self, cands: list[Candidate], summaries: dict,
                 source: str | None = None, released_view: dict | None = None
                 ) -> list[Candidate]:
        """One candidate per host, best first; ``source``'s candidates
        weighed on ``released_view`` (the old allocations freed), the
        others on ``summaries`` (placement's, with them held)."""
        def free(rc: str) -> np.ndarray:
            out = np.zeros(len(cands))
            for i, c in enumerate(cands):
                rp = next((rp for rp, res in c.allocations.items() if rc in res),
                          c.root)
                view = released_view if c.root == source and released_view \
                    else summaries
                s = view.get(rp, {}).get("resources", {}).get(rc)
                out[i] = s["capacity"] - s["used"] if s else 0
            return out
        weights = self.weigher.weigh(free, len(cands))
        out = [c.with_weight(float(w)) for c, w in zip(cands, weights)]
        out.sort(key=lambda c: (-c.weight, c.root))
        best: dict[str, Candidate] = {}
        for c in out:                      # one candidate per host
            best.setdefault(c.root, c)
        return list(best.values())

    def candidates(self, query: CandidateRequest, *, limit: int,
                   ordered: bool = True) -> list[Candidate]:
        cands, summaries = self._ask(query)
        return self._weighed(cands, summaries)[:limit]

    def move_candidates(self, query: CandidateRequest, *, limit: int,
                        source: str, released: Allocations | None,
                        ordered: bool = True) -> MoveCandidates:
        """See the module docstring (always best first)."""
        cands, summaries = self._ask(query)
        if not released:
            weighed = self._weighed(cands, summaries)
            answer = next((c for c in weighed if c.root == source), None)
            return MoveCandidates(answer, [c for c in weighed
                                           if c.root != source][:limit], answer)
        # placement's own pick on the source, the old allocations held
        # (stock's claim there: its first candidate of the host)
        placed = next((c for c in self._weighed(cands, summaries) if c.root == source),
                      None) if any(c.root == source for c in cands) else None
        same, held, view, devices = self._on_source(query, source, released, placed)
        # the source weighed with the old allocations released, the other
        # hosts as placement answered, with them held: a host sharing a
        # provider of the old allocations takes what stock would take
        pool = [c for c in cands if c.root != source]
        pool += [Candidate(source, same[0], mappings=same[1])] if same else []
        weighed = self._weighed(pool, summaries, source, {**summaries, **view})
        same_c = next((c for c in weighed if c.root == source), None)
        held_c = None if held is None else Candidate(
            source, held[0], same_c.weight if same_c is not None else 0.0, held[1])
        return MoveCandidates(same_c, [c for c in weighed
                                       if c.root != source][:limit], held_c,
                              bool(devices))

    def _on_source(self, query: CandidateRequest, source: str,
                   released: Allocations, placed: Candidate | None
                   ) -> tuple[Pinned | None, Pinned | None, dict, frozenset[str]]:
        """(the source's allocation and mappings with ``released`` freed,
        the same with it held, each on the providers the old allocations
        use, or None when it does not fit; provider summaries of the
        source's providers with ``released`` freed; the whole devices among
        the old allocations and the first), from the engine on the source's
        own providers read now; each is placement's own pick on the source
        (``placed``: stock's claim there) when that pick keeps the classes
        of the old allocations where the engine keeps them, so that the
        free choices (new devices, classes new to the server) are stock's.
        Placement answered ``query``: its names exist."""
        index = CapacityIndex.from_snapshot(
            FleetSnapshot(tuple(self._source_records(query, source, released))),
            single_precision_ratio=self.single_precision)
        index.set_known_names(*request_names(query))
        out: list[Pinned | None] = []
        view: dict = {}
        for freed in (released, None):
            fit = index.fit(query, freed)
            rows = fit.rows.tolist()
            row = index.row(source)
            if row not in rows:
                out.append(None)
                continue
            out.append(pinned(index, fit, rows.index(row), released, freed))
            if freed is not None:
                view = index.provider_summaries(index.rows_of(index.live_uuids()),
                                                fit.released)
        if placed is not None:
            old_devices = whole_devices(index, released)
            kept = {rc for rp, res in released.items() if rp not in old_devices
                    for rc in res}
            out = [_as_placed(pick, placed, kept) for pick in out]
        return out[0], out[1], view, whole_devices(
            index, released, out[0][0] if out[0] else None)

    def _source_records(self, query: CandidateRequest, source: str,
                        released: Allocations) -> list[ProviderRecord]:
        """The source and the providers of the old allocations, read now;
        when the query has granular groups, the old allocations use a child
        provider, or a class asked for is held by none of those, also the
        rest of the source's tree (one more list of every provider) and the
        sharing providers of the source's aggregates (a class the server
        does not hold yet may come from any of them)."""
        records = []
        for rp in dict.fromkeys([source] + list(released)):
            try:
                records.append(read_provider(self.client, rp))
            except errors.NotFound:
                continue
        held = {rc for r in records for rc in r.inventories}
        if query.granular or any(r.provider.parent_provider_uuid for r in records) \
                or any(rc not in held for rc in query.resources):
            have = {r.provider.uuid for r in records}
            aggs = next((r.aggregates for r in records
                         if r.provider.uuid == source), frozenset())
            more = {p.uuid: p for p in self.client.list_providers()
                    if p.root_provider_uuid == source}
            more.update((p.uuid, p) for p in self.client.list_sharing_providers(aggs))
            records += read_listed_providers(
                self.client, [p for rp, p in more.items() if rp not in have])[0]
        return records


class PlacementUpkeep:
    """The ``FleetUpkeep`` of ``PlacementCandidateSource``: that source
    keeps no view (placement answers every decision afresh), so there is
    nothing to bring up to date or tell of a write; the reads go to
    placement."""

    def __init__(self, client: PlacementClient):
        self.client = client

    def refresh(self) -> None:
        """No view: nothing to refresh."""

    def after_decision(self) -> None:
        """No view: no background re-read."""

    def changed(self, providers: Iterable[str]) -> None:
        """No view: nothing to re-read."""

    def wrote(self, before: Allocations, after: Allocations) -> None:
        """No view: the next answer is placement's, our write in it."""

    def recheck(self, query: CandidateRequest, limit: int,
                also: Iterable[str] = ()) -> bool:
        """False: placement's answer was already fresh, asking again
        would answer the same."""
        return False

    def consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        """``GET /allocations/{consumer}``."""
        return self.client.get_consumer(consumer_uuid)

    def root_of(self, allocs: Allocations) -> str | None:
        """None: no view is kept (the caller reads placement)."""
        return None


def _as_placed(pick: Pinned | None, placed: Candidate,
               kept: set[str]) -> Pinned | None:
    """``placed`` (allocations and mappings) where it puts each class of
    ``kept`` on the providers ``pick`` does, else ``pick``."""
    if pick is None:
        return None

    def holders(allocs: Allocations, rc: str) -> set[str]:
        return {rp for rp, res in allocs.items() if res.get(rc)}
    if any(holders(pick[0], rc) != holders(placed.allocations, rc) for rc in kept):
        return pick
    mappings = pick[1] if placed.mappings is None else \
        {k: list(v) for k, v in placed.mappings.items()}
    return allocations.copy(placed.allocations), mappings


def _root(req: dict, summaries: dict) -> str:
    """The anchor root of an allocation request: the root of a provider that
    is not a sharing provider (placement summaries carry traits)."""
    for rp in req["allocations"]:
        s = summaries.get(rp, {})
        if SHARING_TRAIT not in s.get("traits", ()):
            return s.get("root_provider_uuid", rp)
    return next(iter(req["allocations"]))


if TYPE_CHECKING:       # mypy checks the classes against the declared contracts
    _IS_A_SOURCE: type[CandidateSource] = PlacementCandidateSource
    _IS_A_PLUGIN: SourcePlugin = PlacementCandidateSource
    _IS_AN_UPKEEP: type[FleetUpkeep] = PlacementUpkeep
