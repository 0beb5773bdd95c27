"""The numpy engine as the driver's candidate source.

Keeps a CapacityIndex as a cache of placement: it is re-synced (by provider
generation) at the start of every scheduling request and refreshed for the
providers a claim touched. A stale row only costs a failed claim and a
retry: placement's atomic write is the truth.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
from oslo_config import cfg

from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.engine.request import CandidateRequest
from scheduler_ext.engine.weigh import Weigher
from scheduler_ext.placement import Allocations, PlacementClient
from scheduler_ext.placement.client import read_provider
from scheduler_ext import errors
from scheduler_ext.request import ScheduleRequest
from scheduler_ext.strategy import Candidate


def candidate_request(request: ScheduleRequest) -> CandidateRequest:
    """The engine query for a ScheduleRequest (its resources and filters)."""
    return CandidateRequest(
        resources=dict(request.resources),
        required=request.required_traits, forbidden=request.forbidden_traits,
        required_any=request.any_traits, member_of=request.member_of,
        forbidden_aggregates=request.forbidden_aggregates,
        in_tree=request.in_tree, root_required=request.root_required,
        root_forbidden=request.root_forbidden)


class EngineCandidateSource:
    """``CandidateSource`` backed by the numpy CapacityIndex."""

    def __init__(self, client: PlacementClient, conf: cfg.ConfigOpts):
        opts = conf.scheduler_ext
        self.client = client
        self.weigher = Weigher.nova(opts.ram_weight_multiplier,
                                    opts.cpu_weight_multiplier,
                                    opts.disk_weight_multiplier)
        self.host_subset_size = opts.host_subset_size
        self.index = CapacityIndex.from_snapshot(
            client.snapshot(),
            single_precision_ratio=opts.allocation_ratio_storage == "single")

    def refresh(self) -> None:
        """Re-read placement; only providers whose generation moved are
        re-indexed."""
        self.index.sync(self.client.snapshot())

    def changed(self, providers: Iterable[str]) -> None:
        for rp in dict.fromkeys(providers):
            try:
                self.index.refresh_provider(read_provider(self.client, rp))
            except errors.NotFound:
                self.index.remove_provider(rp)

    def candidates(self, request: ScheduleRequest, *, limit: int,
                   released: Allocations | None = None,
                   roots: Iterable[str] | None = None) -> list[Candidate]:
        query = candidate_request(request)
        if roots is None:
            choices = self.index.select(
                query, released, weigher=self.weigher, k=limit,
                host_subset_size=self.host_subset_size)
            return [Candidate(c.root, _allocs(c.allocation_request), c.weight)
                    for c in choices]
        fit = self.index.fit(query, released)
        wanted = set(roots)
        positions = [i for i, u in enumerate(fit.uuids()) if u in wanted] \
            if len(wanted) > 8 else _positions(fit, wanted)
        if not positions:
            return []
        weights = self.weigher.weigh(fit.free, len(fit))
        out = [Candidate(fit.uuids(np.array([i]))[0],
                         _allocs(fit.allocation_request(i)), float(weights[i]))
               for i in positions]
        out.sort(key=lambda c: (-c.weight, c.root))
        return out[:limit]


def _positions(fit, wanted: set[str]) -> list[int]:
    """Positions of the wanted roots in ``fit`` (its rows are ascending)."""
    out = []
    for u in wanted:
        row = fit.index._row_of.get(u)
        if row is None:
            continue
        i = int(np.searchsorted(fit.rows, row))
        if i < len(fit.rows) and fit.rows[i] == row:
            out.append(i)
    return out


def _allocs(allocation_request: dict) -> dict[str, dict[str, int]]:
    return {rp: dict(v["resources"])
            for rp, v in allocation_request["allocations"].items()}
