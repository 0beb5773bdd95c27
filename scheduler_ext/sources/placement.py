"""Candidates from placement itself (``GET /allocation_candidates``).

For fleets or queries the numpy engine cannot model exactly (it raises
Unsupported: nested providers, granular groups), placement answers. It
cannot be asked "as if these allocations were free", so a move's release is
real (see ``moves.release``) and ``virtual_release`` is False.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
from oslo_config import cfg

from scheduler_ext import errors
from scheduler_ext.engine.weigh import Weigher
from scheduler_ext.placement import (SHARING_TRAIT, Allocations,
                                     CandidatesEndpoint, PlacementClient,
                                     allocations)
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.sources.base import Candidate, MoveCandidates


class PlacementCandidateSource:
    """``CandidateSource`` asking placement for every decision."""

    virtual_release = False

    def __init__(self, client: PlacementClient, conf: cfg.ConfigOpts):
        if not isinstance(client, CandidatesEndpoint):
            raise errors.Unsupported(
                f"{type(client).__name__} has no allocation candidates "
                "endpoint; the 'placement' engine needs a placement service")
        opts = conf.scheduler_ext
        self.client = client
        self.results = opts.placement_results_limit
        self.weigher = Weigher.nova(opts.ram_weight_multiplier,
                                    opts.cpu_weight_multiplier,
                                    opts.disk_weight_multiplier)

    def refresh(self) -> None:
        """Nothing is cached."""

    def changed(self, providers: Iterable[str]) -> None:
        """Nothing is cached."""

    def _ask(self, query: CandidateRequest) -> tuple[list[Candidate], dict]:
        params = query.replace(limit=self.results).to_query()
        answer = self.client.allocation_candidates(params)
        summaries = answer["provider_summaries"]
        cands = [Candidate(_root(req, summaries), allocations.from_request(req),
                           mappings=req.get("mappings"))
                 for req in answer["allocation_requests"]]
        return cands, summaries

    def _weighed(self, cands: list[Candidate], summaries: dict) -> list[Candidate]:
        def free(rc: str) -> np.ndarray:
            out = np.zeros(len(cands))
            for i, c in enumerate(cands):
                rp = next((rp for rp, res in c.allocations.items() if rc in res),
                          c.root)
                s = summaries.get(rp, {}).get("resources", {}).get(rc)
                out[i] = s["capacity"] - s["used"] if s else 0
            return out
        weights = self.weigher.weigh(free, len(cands))
        out = [Candidate(c.root, c.allocations, float(w), c.mappings)
               for c, w in zip(cands, weights)]
        out.sort(key=lambda c: (-c.weight, c.root))
        best: dict[str, Candidate] = {}
        for c in out:                      # one candidate per host
            best.setdefault(c.root, c)
        return list(best.values())

    def candidates(self, query: CandidateRequest, *, limit: int) -> list[Candidate]:
        cands, summaries = self._ask(query)
        return self._weighed(cands, summaries)[:limit]

    def move_candidates(self, query: CandidateRequest, *, limit: int,
                        source: str, released: Allocations | None) -> MoveCandidates:
        """Placement's current state has ``released`` already released (the
        strategy wrote it); other hosts must fit with it held again."""
        cands, summaries = self._ask(query)
        held = released or {}

        def fits_with_held(c: Candidate) -> bool:
            for rp, res in c.allocations.items():
                for rc, n in res.items():
                    again = held.get(rp, {}).get(rc, 0)
                    if again:
                        s = summaries[rp]["resources"][rc]
                        if s["used"] + again + n > s["capacity"]:
                            return False
            return True

        weighed = self._weighed(cands, summaries)
        same = next((c for c in weighed if c.root == source), None)
        others = [c for c in weighed if c.root != source and fits_with_held(c)]
        held_source = same if same is not None and fits_with_held(same) else None
        return MoveCandidates(same, others[:limit], held_source)


def _root(req: dict, summaries: dict) -> str:
    """The anchor root of an allocation request: the root of a provider that
    is not a sharing provider (placement summaries carry traits)."""
    for rp in req["allocations"]:
        s = summaries.get(rp, {})
        if SHARING_TRAIT not in s.get("traits", ()):
            return s.get("root_provider_uuid", rp)
    return next(iter(req["allocations"]))
