"""The fast-path answer: roots that fit, as arrays, and the k best of them.

A ``Fit`` is what ``CapacityIndex.fit`` returns: the anchor-root rows that
have at least one allocation candidate, and for the one candidate picked
per root the provider row that supplies each class of the unnumbered group
and the provider row of each granular group. Nothing is turned into JSON
until asked, so a scheduler can weigh 100k roots and build requests for
the top few only.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Callable, Mapping, Sequence

import numpy as np

from scheduler_ext.engine import weigh as weighing
from scheduler_ext.engine.fleet.rows import Rows
from scheduler_ext.placement.query import CandidateRequest


@dataclasses.dataclass(frozen=True)
class Choice:
    """One weighed host with the allocation to claim for it.

    ``allocation_request`` is the body of placement's PUT /allocations
    (1.12+ ``allocations`` shape) plus ``mappings`` (1.34+), as in
    ``GET /allocation_candidates``.
    """

    root: str
    weight: float
    allocation_request: dict


@dataclasses.dataclass(frozen=True)
class Fit:
    """Roots fitting a request; see the module docstring.

    ``rows`` are ascending provider rows; ``sources[rc][i]`` is the row
    supplying ``rc`` of the unnumbered group for root ``rows[i]``;
    ``granular[suffix][i]`` the row of that granular group; ``released``
    is ``{(row, rc): units}`` treated as free when the fit was computed
    (applied again to the values read here).
    """

    index: Rows
    request: CandidateRequest
    rows: np.ndarray
    sources: Mapping[str, np.ndarray]
    released: Mapping[tuple[int, str], int]
    granular: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    #: per class, a cheaper reader of ``free`` before ``released`` is
    #: applied (the tree path knows where some suppliers sit in the
    #: column); it answers None when the index changed since the fit
    supplier_free: Mapping[str, Callable[[], np.ndarray | None]] = dataclasses.field(
        default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)

    def uuids(self, positions: np.ndarray | None = None) -> list[str]:
        """Root uuids (all, or at ``positions``)."""
        rows = self.rows if positions is None else self.rows[positions]
        u = self.index.uuids
        return [u[r] for r in rows.tolist()]

    def supplier(self, rc: str) -> np.ndarray:
        """Per root, the row supplying ``rc``: the unnumbered group's
        supplier, else the first granular group taking ``rc``, else the
        root itself."""
        if rc in self.sources:
            return self.sources[rc]
        for group in self.request.granular:
            if rc in group.resources:
                return self.granular[group.suffix]
        return self.rows

    def free(self, rc: str) -> np.ndarray:
        """int64 free units of ``rc`` per root: at the supplying provider
        when the request names ``rc``, else at the root (0 if it has none)."""
        rows = self.supplier(rc)
        col = self.index.columns.get(rc)
        if col is None:
            return np.zeros(len(rows), np.int64)
        quick = self.supplier_free.get(rc)
        out = quick() if quick is not None else None
        if out is None:
            out = col.gather("free", rows, present=rows is not self.rows)
        for (row, c), units in self.released.items():
            if c == rc:
                out[rows == row] += units
        return out

    def root(self, i: int) -> str:
        """The uuid of root ``rows[i]``."""
        return self.index.uuids[int(self.rows[i])]

    def picks(self, positions: Sequence[int] | np.ndarray
              ) -> list[tuple[dict[str, dict[str, int]], dict[str, list[str]]]]:
        """Per position, the allocation picked for root ``rows[i]`` as
        (``{rp: {rc: units}}``, amounts of one class from one provider
        summed over the groups; placement's ``mappings``: the providers of
        each group), built in one pass (each group's providers gathered
        once, not per root)."""
        u = self.index.uuids
        pos = np.asarray(positions, np.int64)
        out = self._unnumbered_all(pos)
        for suffix, resources, rows in [
                (group.suffix, group.resources,
                 self.granular[group.suffix][pos].tolist())
                for group in self.request.granular]:
            for (allocs, mappings), row in zip(out, rows):
                rp = u[row]
                mappings[suffix] = [rp]
                for rc, amount in resources.items():    # none: a resourceless group
                    res = allocs.setdefault(rp, {})
                    res[rc] = res.get(rc, 0) + amount
        return out

    def _unnumbered_all(self, pos: np.ndarray
                        ) -> list[tuple[dict[str, dict[str, int]], dict[str, list[str]]]]:
        """``picks`` of the unnumbered group. A pick takes each class from
        the root or from one other provider (shared disk, say): such picks
        are built as copies of two dicts, the rest class by class."""
        u = self.index.uuids
        amounts = list(self.request.resources.items())
        if not amounts:
            return [({}, {}) for _ in range(len(pos))]
        roots = self.rows[pos]
        suppliers = [self.sources[rc][pos] for rc, _ in amounts]
        local = [rows == roots for rows in suppliers]
        # the provider of the first class not taken from the root (-1: none)
        other = np.full(len(pos), -1, np.int64)
        for rows, here in zip(reversed(suppliers), reversed(local)):
            other = np.where(here, other, rows)
        simple = np.ones(len(pos), bool)     # every other class from ``other``
        pattern = np.zeros(len(pos), np.int64)
        for k, (rows, here) in enumerate(zip(suppliers, local)):
            simple &= here | (rows == other)
            pattern |= here.astype(np.int64) << k
        split: dict[int, tuple[dict[str, int], dict[str, int]]] = {}
        for p in np.unique(pattern).tolist():
            split[p] = ({rc: n for k, (rc, n) in enumerate(amounts) if p >> k & 1},
                        {rc: n for k, (rc, n) in enumerate(amounts) if not p >> k & 1})
        columns = [rows.tolist() for rows in suppliers]
        out = []
        for j, (root, rp2, p, easy) in enumerate(zip(
                roots.tolist(), other.tolist(), pattern.tolist(), simple.tolist())):
            allocs: dict[str, dict[str, int]]
            if easy:    # (mappings sorted by hand: this loop runs per candidate)
                at_root, elsewhere = split[p]
                a = u[root]
                if not elsewhere:
                    allocs, keys = {a: dict(at_root)}, [a]
                elif not at_root:
                    b = u[rp2]
                    allocs, keys = {b: dict(elsewhere)}, [b]
                else:
                    b = u[rp2]
                    allocs = {a: dict(at_root), b: dict(elsewhere)}
                    keys = [a, b] if a < b else [b, a]
            else:
                allocs = {}
                for (rc, amount), rows in zip(amounts, columns):
                    allocs.setdefault(u[rows[j]], {})[rc] = amount
                keys = sorted(allocs)
            out.append((allocs, {"": keys}))
        return out

    def picked(self, i: int) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
        """``picks`` of one position."""
        return self.picks([i])[0]

    def allocation_requests(self, positions: list[int]) -> list[dict]:
        """``picks`` as placement's allocation requests (1.34+)."""
        return [{"allocations": {rp: {"resources": res} for rp, res in allocs.items()},
                 "mappings": mappings} for allocs, mappings in self.picks(positions)]

    def allocation_request(self, i: int) -> dict:
        """``allocation_requests`` of one position."""
        return self.allocation_requests([i])[0]

    def provider_summaries(self, positions) -> dict[str, dict]:
        """Summaries of every provider of the trees used by the picks at
        ``positions`` (placement's rule)."""
        positions = np.asarray(positions, np.int64)
        rows = np.concatenate([self.rows[positions]]
                              + [s[positions] for s in self.sources.values()]
                              + [g[positions] for g in self.granular.values()])
        with self.index.lock:
            return self.index.provider_summaries(
                self.index.tree_members(rows), self.released)

    def best_positions(self, k: int = 1, *, weigher: weighing.Weigher | None = None,
                       host_subset_size: int = 1,
                       rng: random.Random | int | None = None
                       ) -> tuple[list[int], list[float]]:
        """(positions, weights) of the ``k`` best roots: weighed by
        ``weigher`` (none: all weigh 0, so uuid order), ties broken by
        uuid, the first drawn among the best ``host_subset_size`` with
        ``rng`` (a ``random.Random`` or a seed)."""
        order, weights = self.best_arrays(k, weigher=weigher,
                                          host_subset_size=host_subset_size, rng=rng)
        return order.tolist(), weights.tolist()

    def best_arrays(self, k: int = 1, *, weigher: weighing.Weigher | None = None,
                    host_subset_size: int = 1,
                    rng: random.Random | int | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
        """``best_positions`` as numpy arrays (int64 positions, float64
        weights)."""
        if isinstance(rng, int):
            rng = random.Random(rng)
        if weigher is None:
            weights = np.zeros(len(self.rows))
        else:
            weights = weigher.weigh(self.free, len(self.rows))
        order = weighing.top_k(weights, self.index.key_hi, self.index.key_lo,
                               max(k, host_subset_size), rows=self.rows)
        order = weighing.subset_first(order, host_subset_size, rng)[:k]
        return order, weights[order]

    def best(self, k: int = 1, *, weigher: weighing.Weigher | None = None,
             host_subset_size: int = 1,
             rng: random.Random | int | None = None) -> list[Choice]:
        """The ``k`` best roots (see ``best_positions``), each with its
        allocation request."""
        picked, weights = self.best_positions(
            k, weigher=weigher, host_subset_size=host_subset_size, rng=rng)
        u = self.index.uuids
        return [Choice(u[r], w, req) for r, w, req in zip(
            self.rows[picked].tolist(), weights, self.allocation_requests(picked))]
