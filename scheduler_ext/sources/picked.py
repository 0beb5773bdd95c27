"""Engine candidates whose allocations are built when first read.

A decision asks the engine for up to ``max_placement_results`` candidates
(1,000 by default) so that nova's filters can choose among them; only the
one claimed and its alternates need their allocations, unless a filter
reads every allocation request (nova's NUMA and PCI filters do, for a
request with a topology or devices). Building all of them took 2.5 to 3
ms a decision at 10,000 and 100,000 providers. A ``PickedCandidate``
builds its pick from the ``Fit`` it came from (arrays fixed when the fit
was made: the answer is the same whenever it is read): the first read
together with the few read next (those ranked after it, when a ranking
says so), in one pass, and the rest of its batch in one pass after that.
"""

from __future__ import annotations

import operator
from typing import Mapping, Sequence

import numpy as np

from scheduler_ext.engine.fit import Fit
from scheduler_ext.placement import Allocations, WritableAllocations
from scheduler_ext.sources.base import Candidate, IndexRows, LazyCandidates

Pick = tuple[WritableAllocations, dict[str, list[str]]]


class LazyPicks:
    """The picks of ``positions`` of ``fit``, built when first read.

    A miss builds the pick read together with the ones expected next (see
    ``expect``; by default the positions that follow it), up to ``SINGLE``
    in all, in one ``Fit.picks`` call: a call costs about the same for one
    position as for eight (45 to 50 us, warm). Past ``SINGLE`` built (a
    decision whose first claims failed), the rest is built at once."""

    #: picks built in small batches before the rest is built at once
    SINGLE = 8

    def __init__(self, fit: Fit, positions: Sequence[int] | np.ndarray):
        self.fit = fit
        self.positions: list[int] = (positions.tolist()
                                     if isinstance(positions, np.ndarray)
                                     else list(positions))
        self.built: dict[int, Pick] = {}
        #: indices into ``positions`` about to be read (``expect``)
        self.expected: list[int] = []

    def expect(self, ks: Sequence[int]) -> None:
        """Hint that ``ks`` (indices into ``positions``) are read next, so
        that the next miss builds them with the one read (a later hint
        replaces an earlier one)."""
        self.expected = list(ks)

    def get(self, k: int) -> Pick:
        """The pick of ``positions[k]`` (``Fit.picks``)."""
        got = self.built.get(k)
        if got is not None:
            return got
        room = self.SINGLE - len(self.built)
        if room > 0:
            ahead = self.expected or range(k + 1, min(k + room, len(self.positions)))
            ks = [k] + [j for j in dict.fromkeys(ahead)
                        if j != k and j not in self.built][:room - 1]
            self.expected = []
        else:
            ks = [j for j in range(len(self.positions)) if j not in self.built]
        for j, pick in zip(ks, self.fit.picks([self.positions[j] for j in ks])):
            self.built[j] = pick
        return self.built[k]


class PickedCandidate(Candidate):
    """A ``Candidate`` whose ``allocations`` and ``mappings`` are the
    ``k``-th pick of ``picks``, built on first read."""

    __slots__ = ("_picks", "_k")

    def __init__(self, root: str, weight: float, picks: LazyPicks, k: int):
        self.root = root
        self.weight = weight
        self._picks = picks
        self._k = k

    @property
    def allocations(self) -> Allocations:  # type: ignore[override]
        return self._picks.get(self._k)[0]

    @property
    def mappings(self) -> Mapping[str, Sequence[str]] | None:  # type: ignore[override]
        return self._picks.get(self._k)[1]

    def with_weight(self, weight: float) -> Candidate:
        return PickedCandidate(self.root, weight, self._picks, self._k)


class PickedBatch(LazyCandidates):
    """Engine candidates, best first, each made when read (``batch[k]``
    is a ``PickedCandidate``). A decision reads the few it claims and
    offers as alternates, out of every host that fits: the weights stay an
    array, and ``roots`` is made from the index rows when first read (a
    ranking on columns reads the rows only)."""

    __slots__ = ("_roots", "_weights", "_picks", "_ks", "_sources", "_rows")

    def __init__(self, weights: np.ndarray, picks: list[LazyPicks], ks: list[int],
                 sources: Sequence[LazyPicks], rows: IndexRows | None = None,
                 roots: list[str] | None = None):
        if roots is None and rows is None:
            raise ValueError("a batch needs its roots or its index rows")
        self._roots = roots
        self._weights = weights
        #: the roots as rows of the engine index's uuids
        self._rows = rows
        self._picks = picks
        self._ks = ks
        #: the ``LazyPicks`` that ``picks`` holds, each once
        self._sources = list(sources)

    @property
    def roots(self) -> list[str]:
        if self._roots is None:
            assert self._rows is not None
            self._roots = list(map(self._rows.uuids.__getitem__, self._rows.rows.tolist()))
        return self._roots

    def __len__(self) -> int:
        return len(self._weights)

    def weight_at(self, k: int) -> float:
        return float(self._weights[k])

    def root_at(self, k: int) -> str:
        if self._roots is not None:
            return self._roots[k]
        assert self._rows is not None
        return self._rows.uuids[int(self._rows.rows[k])]

    def index_rows(self) -> IndexRows | None:
        return self._rows

    def _item(self, k: int) -> Candidate:
        return PickedCandidate(self.root_at(k), float(self._weights[k]), self._picks[k],
                               self._ks[k])

    def expect(self, ks: Sequence[int]) -> None:
        """Hint that candidates ``ks`` are read next (``LazyPicks.expect``),
        replacing any earlier hint."""
        wanted: dict[int, list[int]] = {id(picks): [] for picks in self._sources}
        for k in ks:
            wanted[id(self._picks[k])].append(self._ks[k])
        for picks in self._sources:
            picks.expect(wanted[id(picks)])

    @classmethod
    def joined(cls, batches: Sequence["PickedBatch"],
               order: Sequence[int]) -> "PickedBatch":
        """``batches`` one after the other, then taken in ``order``
        (positions in that concatenation)."""
        take = operator.itemgetter(*order) if len(order) > 1 else None

        def column(name: str) -> list:
            whole = [x for b in batches for x in getattr(b, name)]
            return [whole[i] for i in order] if take is None else list(take(whole))

        at = np.asarray(order, dtype=np.int64)
        weights = np.concatenate([b._weights for b in batches] or [np.zeros(0)])[at]
        rows = _joined_rows(batches, order)
        return cls(weights, column("_picks"), column("_ks"),
                   sources=[p for b in batches for p in b._sources], rows=rows,
                   roots=column("roots") if rows is None else None)


def _joined_rows(batches: Sequence[PickedBatch], order: Sequence[int]) -> IndexRows | None:
    """The index rows of ``batches`` joined then taken in ``order``; None
    unless every batch knows its rows in the same uuid list."""
    parts: list[IndexRows] = []
    for batch in batches:
        rows = batch.index_rows()
        if rows is None or (parts and rows.uuids is not parts[0].uuids):
            return None
        parts.append(rows)
    if not parts:
        return None
    whole = np.concatenate([p.rows for p in parts])
    return IndexRows(parts[0].uuids, whole[np.asarray(order, dtype=np.int64)])


def picked_candidates(fit: Fit, positions: Sequence[int] | np.ndarray,
                      weights: Sequence[float] | np.ndarray) -> PickedBatch:
    """The candidates at ``positions`` of ``fit`` with their ``weights``
    (numpy arrays or sequences)."""
    picks = LazyPicks(fit, positions)
    n = len(picks.positions)
    rows = fit.rows[positions if isinstance(positions, np.ndarray)
                    else np.asarray(picks.positions, np.int64)]
    return PickedBatch(np.asarray(weights, dtype=np.float64), [picks] * n, list(range(n)),
                       (picks,), IndexRows(fit.index.uuids, rows))
