"""The numpy engine as the driver's candidate source.

Keeps a CapacityIndex as a cache of placement. Placement does not bump a
provider's generation when allocations leave it (``DELETE /allocations``,
or a consumer's allocations replaced by ones elsewhere), so a refresh
re-indexes by generation (inventories, traits, aggregates) and corrects
usage by value. A stale row only costs a failed claim and a retry:
placement's atomic write is the truth.
"""

from __future__ import annotations

import time
from typing import Iterable

import numpy as np
from oslo_config import cfg

from scheduler_ext import errors
from scheduler_ext.engine.fit import Fit
from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.engine.weigh import Weigher, top_k
from scheduler_ext.placement import Allocations, PlacementClient, allocations
from scheduler_ext.placement.client import read_provider
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.placement.sql_snapshot import SqlSnapshot
from scheduler_ext.sources.base import Candidate, MoveCandidates


class EngineCandidateSource:
    """``CandidateSource`` backed by the numpy CapacityIndex."""

    virtual_release = True

    def __init__(self, client: PlacementClient, conf: cfg.ConfigOpts):
        opts = conf.scheduler_ext
        self.client = client
        self.weigher = Weigher.nova(opts.ram_weight_multiplier,
                                    opts.cpu_weight_multiplier,
                                    opts.disk_weight_multiplier)
        self.host_subset_size = opts.host_subset_size
        self.refresh_interval = opts.refresh_interval
        self._read_at = time.monotonic()
        self.sql = None
        if opts.snapshot_source == "sql":
            if not opts.placement_database_connection:
                raise errors.InvalidRequest(
                    "snapshot_source = sql needs placement_database_connection",
                    field="placement_database_connection", value=None)
            self.sql = SqlSnapshot(opts.placement_database_connection)
        snap = self.sql.snapshot() if self.sql else client.snapshot()
        self.index = CapacityIndex.from_snapshot(
            snap, single_precision_ratio=opts.allocation_ratio_storage == "single")

    # -------------------------------------------------------------- cache
    def refresh(self) -> None:
        """Bring the index up to date with placement (unless it was read
        less than ``refresh_interval`` seconds ago)."""
        now = time.monotonic()
        if self.refresh_interval and now - self._read_at < self.refresh_interval:
            return
        self._read_at = now
        if self.sql is None:
            # sync re-indexes by generation and corrects usage by value
            self.index.sync(self.client.snapshot())
            return
        gens = self.sql.generations()
        moved = [u for u, g in gens.items() if self.index.generation(u) != g]
        for record in self.sql.snapshot(moved).providers:
            self.index.refresh_provider(record)
        for u in [u for u in self.index.row_of if u not in gens]:
            self.index.remove_provider(u)
        self.index.replace_usages(self.sql.usage_rows())

    def changed(self, providers: Iterable[str]) -> None:
        for rp in dict.fromkeys(providers):
            try:
                record = read_provider(self.client, rp)
            except errors.NotFound:
                self.index.remove_provider(rp)
                continue
            self.index.refresh_provider(record)

    # --------------------------------------------------------- candidates
    def candidates(self, query: CandidateRequest, *, limit: int) -> list[Candidate]:
        choices = self.index.select(
            query, weigher=self.weigher, k=limit,
            host_subset_size=self.host_subset_size)
        return [Candidate(c.root, allocations.from_request(c.allocation_request),
                          c.weight)
                for c in choices]

    def move_candidates(self, query: CandidateRequest, *, limit: int,
                        source: str, released: Allocations | None) -> MoveCandidates:
        fit_r = self.index.fit(query, released) if released else None
        fit_h = self.index.fit(query)
        weigh_fit = fit_r if fit_r is not None else fit_h
        weights = self.weigher.weigh(weigh_fit.free, len(weigh_fit))
        # every host weighed against the same (released) view
        pos_h = np.searchsorted(weigh_fit.rows, fit_h.rows)
        w_h = weights[pos_h]
        src_row = self.index.row_of.get(source)
        same = held_source = None
        if src_row is not None:
            i = _position(weigh_fit.rows, src_row)
            if i is not None:
                same = _candidate(weigh_fit, i, weights[i])
            j = _position(fit_h.rows, src_row)
            if j is not None:
                held_source = _candidate(fit_h, j, w_h[j])
        keep = fit_h.rows != (src_row if src_row is not None else -1)
        idx = np.flatnonzero(keep)
        order = top_k(w_h[idx], self.index.key_hi[fit_h.rows[idx]],
                      self.index.key_lo[fit_h.rows[idx]], limit)
        others = [_candidate(fit_h, int(idx[k]), w_h[idx[k]]) for k in order.tolist()]
        return MoveCandidates(same, others, held_source)


def _position(rows: np.ndarray, row: int) -> int | None:
    i = int(np.searchsorted(rows, row))
    return i if i < len(rows) and rows[i] == row else None


def _candidate(fit: Fit, i: int, weight: float) -> Candidate:
    return Candidate(fit.uuids(np.array([i]))[0],
                     allocations.from_request(fit.allocation_request(i)),
                     float(weight))
