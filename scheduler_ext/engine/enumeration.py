"""Exact candidate enumeration in placement's shape (the slow, full path).

For each anchor root still possible after the vectorized masks, the
suppliers of each requested class are the root itself (if it may supply
the class) and every sharing provider that may supply it and shares an
aggregate with the root. One candidate is one supplier per class (a class
is never split); their cross product, kept when the suppliers together meet
every required trait group, de-duplicated across anchors (a candidate is
its allocations, not its anchor). This is placement-semantics.md section 2.
"""

from __future__ import annotations

import itertools
import random
from typing import TYPE_CHECKING, Iterator

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.engine.index import CapacityIndex
    from scheduler_ext.engine.solver import Evaluation, Solver


class Enumerator:
    """Candidates of one evaluated query (``Solver.evaluate``)."""

    def __init__(self, index: "CapacityIndex", solver: "Solver", ev: "Evaluation"):
        self.ix = index
        self.ev = ev
        self.names = index.traits.names
        self.aggsets = index.aggregates.sets
        # rc -> aggregate id -> sharing rows that may supply rc, and
        # rc -> row -> rank in preference order (most free first, uuid)
        self.by_agg: dict[str, dict[int, list[int]]] = {}
        self.rank: dict[str, dict[int, int]] = {}
        for rc in ev.rcs:
            supply = ev.shared[rc]
            if not len(supply):
                continue
            ranked = solver.preference(supply, rc).tolist()
            self.rank[rc] = {r: i for i, r in enumerate(ranked)}
            by_agg: dict[int, list[int]] = {}
            for r in ranked:
                for a in self.aggsets[r]:
                    by_agg.setdefault(a, []).append(r)
            self.by_agg[rc] = by_agg

    def suppliers(self, root: int) -> list[list[int]] | None:
        """Per requested class, the rows that may supply it for ``root``
        (the root first, then sharing rows by preference); None if a class
        has none."""
        out = []
        for rc in self.ev.rcs:
            opts = [root] if self.ev.local[rc][root] else []
            by_agg = self.by_agg.get(rc)
            if by_agg:
                extra: set[int] = set()
                for a in self.aggsets[root]:
                    extra.update(by_agg.get(a, ()))
                extra.discard(root)
                opts += sorted(extra, key=self.rank[rc].__getitem__)
            if not opts:
                return None
            out.append(opts)
        return out

    def root_candidates(self, root: int) -> Iterator[tuple[int, ...]]:
        """Candidates anchored at ``root``: one supplier row per class, in
        ``ev.rcs`` order."""
        opts = self.suppliers(root)
        if opts is None:
            return
        groups = self.ev.groups
        for combo in itertools.product(*opts):
            if groups:
                provs = set(combo)
                if not all(any(not g.isdisjoint(self.names[p]) for p in provs)
                           for g in groups):
                    continue
            yield combo

    def roots_by_uuid(self, first: int | None = None) -> Iterator[int]:
        """The possible anchors in uuid order. With ``first``, sorted in
        growing chunks (the smallest ``first`` uuids, then 4x more...), so a
        limited answer does not sort every root."""
        ix = self.ix
        rest = np.flatnonzero(self.ev.pre)
        chunk = first or len(rest)
        while len(rest):
            if chunk < len(rest):
                hi = ix.key_hi[rest]
                edge = np.partition(hi, chunk - 1)[chunk - 1]
                take = hi <= edge  # ties in the high half stay together
                head, rest = rest[take], rest[~take]
            else:
                head, rest = rest, rest[:0]
            yield from head[np.lexsort((ix.key_lo[head], ix.key_hi[head]))].tolist()
            chunk *= 4

    def allocation_request(self, combo: tuple[int, ...]) -> dict:
        u = self.ix.uuids
        allocs: dict[str, dict] = {}
        for rc, row in zip(self.ev.rcs, combo):
            allocs.setdefault(u[row], {"resources": {}})["resources"][rc] = \
                self.ev.request.resources[rc]
        return {"allocations": allocs, "mappings": {"": sorted(allocs)}}

    def placement_answer(self, rng: random.Random | int | None = None) -> dict:
        """The whole ``GET /allocation_candidates`` body (see module doc)."""
        request = self.ev.request
        ix = self.ix
        limit = request.limit
        early = limit if limit is not None and not request.randomize else None
        seen: set[tuple[int, ...]] = set()
        out: list[tuple[int, ...]] = []
        for root in self.roots_by_uuid(4 * early if early is not None else None):
            for combo in self.root_candidates(root):
                if combo not in seen:
                    seen.add(combo)
                    out.append(combo)
            if early is not None and len(out) >= early:
                break
        if request.randomize:
            if not isinstance(rng, random.Random):
                rng = random.Random(rng)
            if limit is not None and limit < len(out):
                out = rng.sample(out, limit)
            else:
                rng.shuffle(out)
        elif limit is not None:
            out = out[:limit]
        rows = sorted({r for combo in out for r in combo})
        return {"allocation_requests": [self.allocation_request(c) for c in out],
                "provider_summaries": ix.provider_summaries(rows)}
