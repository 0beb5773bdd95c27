"""The numpy engine as the driver's candidate source: it answers from the
``CapacityIndex`` a ``FleetView`` keeps (the engine's cached view of
placement, see ``fleet_view``); the view, not the source, is kept up to
date."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from oslo_config import cfg

from scheduler_ext.engine.fit import Fit
from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.engine.pinned import pinned, whole_devices
from scheduler_ext.engine.weigh import DEFAULT_WEIGHING, Weighing
from scheduler_ext.placement import Allocations, PlacementClient
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.sources.base import (Candidate, CandidateSource, MoveCandidates,
                                        SourcePlugin)
from scheduler_ext.sources.fleet_view import FleetView
from scheduler_ext.sources.picked import PickedBatch, picked_candidates


class EngineCandidateSource:
    """``CandidateSource`` answering from a ``CapacityIndex`` (the one a
    ``FleetView`` keeps, see ``build``); hosts are ordered by ``weighing``
    (under nova, nova's own options). It only reads the index."""

    def __init__(self, index: CapacityIndex,
                 weighing: Weighing = DEFAULT_WEIGHING):
        self.weigher = weighing.weigher
        self.host_subset_size = weighing.host_subset_size
        self.index = index

    @classmethod
    def build(cls, client: PlacementClient, conf: cfg.ConfigOpts,
              weighing: Weighing = DEFAULT_WEIGHING
              ) -> tuple[FleetView, "EngineCandidateSource"]:
        """A ``FleetView`` of ``client``'s placement (one full read) and
        the source answering from its index."""
        view = FleetView(client, conf)
        return view, cls(view.index, weighing)

    # --------------------------------------------------------- candidates
    def candidates(self, query: CandidateRequest, *, limit: int,
                   ordered: bool = True) -> PickedBatch:
        fit = self.index.fit(query)
        if not ordered and limit >= len(fit):   # every host, in the index's order
            return picked_candidates(fit, np.arange(len(fit)), np.zeros(len(fit)))
        picked, weights = fit.best_arrays(
            limit, weigher=self.weigher, host_subset_size=self.host_subset_size)
        return picked_candidates(fit, picked, weights)

    def move_candidates(self, query: CandidateRequest, *, limit: int,
                        source: str, released: Allocations | None,
                        ordered: bool = True) -> MoveCandidates:
        """Every host weighed against the view with ``released`` freed; the
        source as it would be on that view (``same``) and as it is
        (``held_source``); the other hosts as they are. A root whose pick
        takes nothing from a released provider has the same pick, and
        fits, in both views, so only the roots whose picks do (the source,
        hosts drawing on a released shared pool) are solved again on the
        held view."""
        fit = self.index.fit(query, released or None)
        weights = self.weigher.weigh(fit.free, len(fit))
        src_row = self.index.row(source)
        if src_row is None:
            src_row = -1        # a row no fit holds
        i = _position(fit.rows, src_row)
        redo = _drawing_on(self.index, fit, released) if released else \
            np.zeros(len(fit), bool)
        held = self.index.fit(query, only=fit.rows[redo]) if redo.any() else None
        same = held_source = None
        if i is not None:
            same = self._on_source(fit, i, weights[i], released, released)
            if not redo[i]:     # the source is the same in both views
                held_source = self._on_source(fit, i, weights[i], released,
                                              None) if released else same
        # candidates: untouched roots from ``fit``, redone ones from ``held``
        mine = np.flatnonzero(~redo & (fit.rows != src_row))
        parts: list[tuple[Fit, np.ndarray, np.ndarray]] = [(fit, mine, weights[mine])]
        if held is not None:
            again = self.index.row_mask(fit.rows[redo])
            j = _position(held.rows, src_row)
            if j is not None and i is not None and redo[i]:
                held_source = self._on_source(held, j, weights[i], released, None)
            theirs = np.flatnonzero(again[held.rows] & (held.rows != src_row))
            parts.append((held, theirs, weights[np.searchsorted(
                fit.rows, held.rows[theirs])]))
        devices = whole_devices(self.index, released,
                                same.allocations if same else None)
        return MoveCandidates(same, _best_of(parts, limit, self.index, ordered),
                              held_source, bool(devices))

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


def _drawing_on(index: CapacityIndex, fit: Fit, released: Allocations) -> np.ndarray:
    """bool per root of ``fit`` (a fit of ``index``): the root or one of its
    picks (any class, any group) is a provider of ``released``."""
    mark = index.row_mask(index.rows_of(released))
    out = mark[fit.rows]
    seen = {id(fit.rows)}   # the classes a root holds itself share its array
    for rows in (*fit.sources.values(), *fit.granular.values()):
        if id(rows) not in seen:
            seen.add(id(rows))
            out |= mark[rows]
    return out


def _best_of(parts: list[tuple[Fit, np.ndarray, np.ndarray]], limit: int,
             index: CapacityIndex, ordered: bool = True) -> PickedBatch:
    """The ``limit`` best candidates over ``parts`` ((fit, positions,
    weights) each), best first (weight, then the index's key); in the
    parts' order when not ``ordered`` and all are within ``limit``."""
    rows = np.concatenate([f.rows[p] for f, p, _ in parts])
    weights = np.concatenate([w for _, _, w in parts])
    if not ordered and limit >= len(rows):
        order = np.arange(len(rows))
    else:
        order = index.best_of(weights, rows, limit)
    batches: list[PickedBatch] = []
    ranks = []          # per part, where its candidates stand in ``order``
    start = 0
    for f, pos, _ in parts:
        k = np.flatnonzero((order >= start) & (order < start + len(pos)))
        if len(k):
            chosen = order[k]
            batches.append(picked_candidates(f, pos[chosen - start], weights[chosen]))
            ranks.append(k)
        start += len(pos)
    if len(batches) == 1:
        return batches[0]
    return PickedBatch.joined(batches, np.argsort(
        np.concatenate(ranks)).tolist() if ranks else [])


def _position(rows: np.ndarray, row: int) -> int | None:
    i = int(np.searchsorted(rows, row))
    return i if i < len(rows) and rows[i] == row else None


def _candidate(fit: Fit, i: int, weight: float) -> Candidate:
    return picked_candidates(fit, [i], [weight])[0]


if TYPE_CHECKING:       # mypy checks the class against the declared contracts
    _IS_A_SOURCE: type[CandidateSource] = EngineCandidateSource
    _IS_A_PLUGIN: SourcePlugin = EngineCandidateSource
