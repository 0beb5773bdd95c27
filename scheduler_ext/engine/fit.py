"""The fast-path answer: roots that fit, as arrays, and the k best of them.

A ``Fit`` is what ``CapacityIndex.fit`` returns: the anchor-root rows that
have at least one allocation candidate, and for each requested class the
provider row that supplies it in the one candidate picked per root. Nothing
is turned into JSON until asked, so a scheduler can weigh 100k roots and
build requests for the top few only.
"""

from __future__ import annotations

import dataclasses
import random
from typing import TYPE_CHECKING, Mapping

import numpy as np

from scheduler_ext.engine import weigh as weighing
from scheduler_ext.placement.query import CandidateRequest

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.engine.index import CapacityIndex


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
    supplying ``rc`` for root ``rows[i]``; ``released`` is ``{(row, rc):
    units}`` treated as free when the fit was computed (applied again to
    the values read here).
    """

    index: "CapacityIndex"
    request: CandidateRequest
    rows: np.ndarray
    sources: Mapping[str, np.ndarray]
    released: Mapping[tuple[int, str], int]

    def __len__(self) -> int:
        return len(self.rows)

    def uuids(self, positions: np.ndarray | None = None) -> list[str]:
        """Root uuids (all, or at ``positions``)."""
        rows = self.rows if positions is None else self.rows[positions]
        u = self.index.uuids
        return [u[r] for r in rows.tolist()]

    def free(self, rc: str) -> np.ndarray:
        """int64 free units of ``rc`` per root: at the supplying provider
        when the request names ``rc``, else at the root (0 if it has none)."""
        rows = self.sources.get(rc, self.rows)
        col = self.index.columns.get(rc)
        if col is None:
            return np.zeros(len(rows), np.int64)
        out = col.gather("free", rows)
        for (row, c), units in self.released.items():
            if c == rc:
                out[rows == row] += units
        return out

    def allocation_request(self, i: int) -> dict:
        """The allocation request picked for root ``rows[i]``."""
        u = self.index.uuids
        allocs: dict[str, dict] = {}
        for rc, amount in self.request.resources.items():
            rp = u[int(self.sources[rc][i])]
            allocs.setdefault(rp, {"resources": {}})["resources"][rc] = amount
        return {"allocations": allocs, "mappings": {"": sorted(allocs)}}

    def provider_summaries(self, positions) -> dict[str, dict]:
        """Summaries of every provider used by the picks at ``positions``."""
        positions = np.asarray(positions, np.int64)
        rows = np.concatenate([self.rows[positions]]
                              + [s[positions] for s in self.sources.values()])
        with self.index.lock:
            return self.index.provider_summaries(rows, self.released)

    def best(self, k: int = 1, *, weigher: weighing.Weigher | None = None,
             host_subset_size: int = 1,
             rng: random.Random | int | None = None) -> list[Choice]:
        """The ``k`` best roots: weighed by ``weigher`` (none: all weigh 0,
        so uuid order), ties broken by uuid, the first drawn among the best
        ``host_subset_size`` with ``rng`` (a ``random.Random`` or a seed)."""
        if isinstance(rng, int):
            rng = random.Random(rng)
        if weigher is None:
            weights = np.zeros(len(self.rows))
        else:
            weights = weigher.weigh(self.free, len(self.rows))
        order = weighing.top_k(weights, self.index.key_hi, self.index.key_lo,
                               max(k, host_subset_size), rows=self.rows)
        order = weighing.subset_first(order, host_subset_size, rng)[:k]
        u = self.index.uuids
        return [Choice(u[int(self.rows[i])], float(weights[i]),
                       self.allocation_request(int(i))) for i in order.tolist()]
