"""The numpy engine as the driver's candidate source, over a ``FleetView``
(the engine's cached view of placement, see ``fleet_view``)."""

from __future__ import annotations

from typing import Iterable

import numpy as np
from oslo_config import cfg

from scheduler_ext.engine.fit import Fit
from scheduler_ext.engine.pinned import pinned
from scheduler_ext.engine.weigh import Weigher, top_k
from scheduler_ext.placement import Allocations, PlacementClient, allocations
from scheduler_ext.placement.model import ConsumerAllocations
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.sources.base import Candidate, MoveCandidates
from scheduler_ext.sources.fleet_view import FleetView


class EngineCandidateSource:
    """``CandidateSource`` backed by the numpy CapacityIndex."""

    virtual_release = True

    def __init__(self, client: PlacementClient, conf: cfg.ConfigOpts):
        opts = conf.scheduler_ext
        self.weigher = Weigher.nova(opts.ram_weight_multiplier,
                                    opts.cpu_weight_multiplier,
                                    opts.disk_weight_multiplier)
        self.host_subset_size = opts.host_subset_size
        self.view = FleetView(client, conf)
        self.index = self.view.index

    def refresh(self) -> None:
        self.view.refresh()

    def changed(self, providers: Iterable[str]) -> None:
        self.view.changed(providers)

    def wrote(self, before: Allocations, after: Allocations) -> None:
        self.view.wrote(before, after)

    def recheck(self, query: CandidateRequest, limit: int,
                also: Iterable[str] = ()) -> bool:
        return self.view.recheck(query, limit, also)

    def consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        """What one consumer holds, through the view's change source."""
        return self.view.consumer(consumer_uuid)

    # --------------------------------------------------------- candidates
    def candidates(self, query: CandidateRequest, *, limit: int) -> list[Candidate]:
        fit = self.index.fit(query)
        picked, weights = fit.best_positions(
            limit, weigher=self.weigher, host_subset_size=self.host_subset_size)
        return _candidates(fit, picked, weights)

    def move_candidates(self, query: CandidateRequest, *, limit: int,
                        source: str, released: Allocations | None) -> MoveCandidates:
        fit_r = self.index.fit(query, released) if released else None
        fit_h = self.index.fit(query)
        weigh_fit = fit_r if fit_r is not None else fit_h
        weights = self.weigher.weigh(weigh_fit.free, len(weigh_fit))
        # every host weighed against the same (released) view
        w_h = weights if weigh_fit is fit_h else \
            weights[np.searchsorted(weigh_fit.rows, fit_h.rows)]
        src_row = self.index.row_of.get(source)
        same = held_source = None
        if src_row is not None:
            i = _position(weigh_fit.rows, src_row)
            if i is not None:
                same = self._on_source(weigh_fit, i, weights[i], released,
                                       released)
            j = _position(fit_h.rows, src_row)
            if j is not None:
                held_source = self._on_source(fit_h, j, w_h[j], released, None)
        keep = fit_h.rows != (src_row if src_row is not None else -1)
        idx = np.flatnonzero(keep)
        order = top_k(w_h[idx], self.index.key_hi[fit_h.rows[idx]],
                      self.index.key_lo[fit_h.rows[idx]], limit)
        positions = idx[order]
        others = _candidates(fit_h, positions, w_h[positions].tolist())
        return MoveCandidates(same, others, held_source)

    def _on_source(self, fit: Fit, i: int, weight: float,
                   old: Allocations | None,
                   released: Allocations | None) -> Candidate | None:
        """The source host's candidate: on the providers the server's old
        allocations use (its disk stays on the sharing provider it is on,
        its devices on their child providers, its granular groups where the
        request allows; see ``engine.pinned``),
        checked with ``released`` treated as free; None if that does not
        fit. Without old allocations, the engine's own pick."""
        cand = _candidate(fit, i, weight)
        if not old:
            return cand
        kept = pinned(self.index, fit, i, old, released)
        return None if kept is None else Candidate(cand.root, kept[0], weight, kept[1])


def _position(rows: np.ndarray, row: int) -> int | None:
    i = int(np.searchsorted(rows, row))
    return i if i < len(rows) and rows[i] == row else None


def _candidates(fit: Fit, positions, weights) -> list[Candidate]:
    """The candidates at ``positions`` of ``fit`` with their ``weights``,
    their picks built in one batch (``Fit.picks``)."""
    u = fit.index.uuids
    return [Candidate(u[r], allocs, float(w), mappings)
            for r, w, (allocs, mappings) in zip(
                fit.rows[positions].tolist(), weights, fit.picks(positions))]


def _candidate(fit: Fit, i: int, weight: float) -> Candidate:
    return _candidates(fit, [i], [weight])[0]
