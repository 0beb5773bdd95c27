"""The numpy engine as the driver's candidate source, over a ``FleetView``
(the engine's cached view of placement, see ``fleet_view``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import numpy as np
from oslo_config import cfg

from scheduler_ext.engine.fit import Fit
from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.engine.pinned import pinned, whole_devices
from scheduler_ext.engine.weigh import DEFAULT_WEIGHING, Weighing, top_k
from scheduler_ext.placement import Allocations, PlacementClient
from scheduler_ext.placement.model import ConsumerAllocations
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.sources.base import Candidate, CandidateSource, MoveCandidates
from scheduler_ext.sources.fleet_view import FleetView
from scheduler_ext.sources.picked import PickedBatch, picked_candidates


class EngineCandidateSource:
    """``CandidateSource`` backed by the numpy CapacityIndex; hosts are
    ordered by ``weighing`` (under nova, nova's own options)."""

    def __init__(self, client: PlacementClient, conf: cfg.ConfigOpts,
                 weighing: Weighing = DEFAULT_WEIGHING):
        self.weigher = weighing.weigher
        self.host_subset_size = weighing.host_subset_size
        self.view = FleetView(client, conf)
        self.index = self.view.index

    def refresh(self) -> None:
        self.view.refresh()

    def after_decision(self) -> None:
        """The fleet view's background re-read, when due."""
        self.view.reread_if_due()

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

    def root_of(self, allocs: Allocations) -> str | None:
        """The one root the non-sharing providers of ``allocs`` belong to
        in the view (a server's compute node; shared pools left out), None
        when a provider is unknown or there is not exactly one."""
        ix, roots = self.index, set()
        with ix.lock:
            for rp in allocs:
                row = ix.row_of.get(rp)
                if row is None or not ix.alive[row]:
                    return None
                if row not in ix.sharing_set:
                    roots.add(ix.tree.get(row, (None, rp))[1])
        return roots.pop() if len(roots) == 1 else None

    # --------------------------------------------------------- candidates
    def candidates(self, query: CandidateRequest, *, limit: int) -> PickedBatch:
        fit = self.index.fit(query)
        picked, weights = fit.best_arrays(
            limit, weigher=self.weigher, host_subset_size=self.host_subset_size)
        return picked_candidates(fit, picked, weights)

    def move_candidates(self, query: CandidateRequest, *, limit: int,
                        source: str, released: Allocations | None) -> MoveCandidates:
        """Every host weighed against the view with ``released`` freed; the
        source as it would be on that view (``same``) and as it is
        (``held_source``); the other hosts as they are. A root whose pick
        takes nothing from a released provider has the same pick, and
        fits, in both views, so only the roots whose picks do (the source,
        hosts drawing on a released shared pool) are solved again on the
        held view."""
        fit = self.index.fit(query, released or None)
        weights = self.weigher.weigh(fit.free, len(fit))
        src_row = self.index.row_of.get(source, -1)
        i = _position(fit.rows, src_row)
        redo = _drawing_on(fit, released) if released else \
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
            again = np.zeros(self.index.n_rows, bool)
            again[fit.rows[redo]] = True
            j = _position(held.rows, src_row)
            if j is not None and i is not None and redo[i]:
                held_source = self._on_source(held, j, weights[i], released, None)
            theirs = np.flatnonzero(again[held.rows] & (held.rows != src_row))
            parts.append((held, theirs, weights[np.searchsorted(
                fit.rows, held.rows[theirs])]))
        devices = whole_devices(self.index, released,
                                same.allocations if same else None)
        return MoveCandidates(same, _best_of(parts, limit, self.index),
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


def _drawing_on(fit: Fit, released: Allocations) -> np.ndarray:
    """bool per root of ``fit``: the root or one of its picks (any class,
    any group) is a provider of ``released``."""
    ix = fit.index
    mark = np.zeros(ix.n_rows, bool)
    mark[[ix.row_of[rp] for rp in released if rp in ix.row_of]] = True
    out = mark[fit.rows]
    seen = {id(fit.rows)}   # the classes a root holds itself share its array
    for rows in (*fit.sources.values(), *fit.granular.values()):
        if id(rows) not in seen:
            seen.add(id(rows))
            out |= mark[rows]
    return out


def _best_of(parts: list[tuple[Fit, np.ndarray, np.ndarray]], limit: int,
             index: CapacityIndex) -> PickedBatch:
    """The ``limit`` best candidates over ``parts`` ((fit, positions,
    weights) each), best first (weight, then the index's key)."""
    rows = np.concatenate([f.rows[p] for f, p, _ in parts])
    weights = np.concatenate([w for _, _, w in parts])
    order = top_k(weights, index.key_hi, index.key_lo, limit, rows=rows)
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


if TYPE_CHECKING:       # mypy checks the class against the declared contract
    _IS_A_SOURCE: type[CandidateSource] = EngineCandidateSource
