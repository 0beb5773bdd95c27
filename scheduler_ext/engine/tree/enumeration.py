"""Exact candidates on provider trees and granular groups (the full path).

For an anchor root, each slot (``supply``) may be filled by the members of
the root's tree that may fill it (best first) and by the sharing providers
that may fill it and share an aggregate with any member of the tree. A
candidate is one provider per slot: the unnumbered group's providers must
meet its required traits collectively; then, as placement merges its
groups: amounts of one class from one provider are summed and must fit
(capacity, ``max_unit``), ``isolate`` wants distinct providers for the
granular groups, ``same_subtree`` one provider of each set above (or equal
to) all the others. Candidates are de-duplicated across anchors by their
allocations and mappings (placement's ``AllocationRequest`` equality).
"""

from __future__ import annotations

import itertools
import random
from typing import TYPE_CHECKING, Iterator

import numpy as np

from scheduler_ext.engine.fleet.rows import Rows
from scheduler_ext.engine.fleet.trees import TreeAggregates, Trees
from scheduler_ext.engine.tree.supply import Supply

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.engine.tree.solver import TreeSolver

Combo = tuple[int, ...]
#: (allocations {(row, rc): units}, mappings {suffix: rows})
Key = tuple[frozenset, frozenset]


class TreeEnumerator:
    """Candidates of one request over one index (caller holds the lock)."""

    def __init__(self, index: Rows, trees: Trees, tagg: TreeAggregates,
                 sup: Supply, solver: "TreeSolver"):
        self.ix = index
        self.trees = trees
        self.tagg = tagg
        self.sup = sup
        self.unnumbered = sup.unnumbered_slots()
        self.names = index.traits.names
        self.solver = solver
        self.key = solver.key
        self._sharing: list[tuple[dict[int, list[int]], dict[int, int]]] | None = None

    def sharing(self, s: int) -> tuple[dict[int, list[int]], dict[int, int]]:
        """Slot ``s``'s sharing rows by aggregate id, and their rank (best
        first); built on first use."""
        if self._sharing is None:
            self._sharing = []
            for slot in self.sup.slots:
                ranked = self.solver.ranked_sharing(slot.shared, slot.score_rc).tolist()
                by_agg: dict[int, list[int]] = {}
                for r in ranked:
                    for a in self.ix.aggregates.sets[r]:
                        by_agg.setdefault(a, []).append(r)
                self._sharing.append((by_agg, {r: i for i, r in enumerate(ranked)}))
        return self._sharing[s]

    # --------------------------------------------------------------- options
    def options(self, j: int) -> list[list[int]] | None:
        """Per slot, the rows that may fill it for compact root ``j`` (tree
        members best first, then sharing providers best first); None when
        a slot has none."""
        members = self.trees.members(j)
        aggs = self.tagg.of(j).tolist()
        mine = set(members.tolist())
        out = []
        for s, slot in enumerate(self.sup.slots):
            local = members[slot.local[members]]
            if len(local) > 1:
                local = local[np.argsort(-self.key(local, slot.score_rc), kind="stable")]
            extra: set[int] = set()
            if len(slot.shared):
                by_agg, rank = self.sharing(s)
                for a in aggs:
                    extra.update(by_agg.get(a, ()))
            opts = local.tolist() + sorted(extra - mine, key=rank.__getitem__) \
                if extra else local.tolist()
            if not opts:
                return None
            out.append(opts)
        return out

    def root_candidates(self, j: int) -> Iterator[Combo]:
        """Candidates anchored at compact root ``j``: one row per slot."""
        opts = self.options(j)
        if opts is None:
            return
        u = self.unnumbered
        first = [opts[s] for s in u]
        rest = [opts[s] for s in range(len(u), len(opts))]
        groups = self.sup.trait_groups
        for a in itertools.product(*first):
            if groups:
                have = frozenset().union(*(self.names[r] for r in set(a)))
                if not all(have & g for g in groups):
                    continue
            for b in itertools.product(*rest):
                combo = a + b
                if self.compatible(combo):
                    yield combo

    def first(self, j: int) -> Combo | None:
        return next(self.root_candidates(j), None)

    # ---------------------------------------------------------------- checks
    def totals(self, combo: Combo) -> dict[tuple[int, str], int]:
        out: dict[tuple[int, str], int] = {}
        for row, slot in zip(combo, self.sup.slots):
            for rc, n in slot.amounts.items():
                out[(row, rc)] = out.get((row, rc), 0) + n
        return out

    def compatible(self, combo: Combo) -> bool:
        """Placement's checks of a merged candidate (module docstring)."""
        slots = self.sup.slots
        request = self.sup.request
        granular = [row for row, slot in zip(combo, slots) if slot.suffix]
        if request.isolate and len(set(granular)) != len(granular):
            return False
        by_suffix = {slot.suffix: row for row, slot in zip(combo, slots) if slot.suffix}
        for names in request.same_subtree:
            if not self._same_subtree({by_suffix[x] for x in names}):
                return False
        seen: set[tuple[int, str]] = set()
        shared: set[tuple[int, str]] = set()
        for row, slot in zip(combo, slots):
            for rc in slot.amounts:
                (shared if (row, rc) in seen else seen).add((row, rc))
        totals = self.totals(combo) if shared else {}
        for row, rc in shared:
            col = self.ix.columns[rc]
            p = col.pos(row)
            if col.free[p] < totals[(row, rc)] or col.max_unit[p] < totals[(row, rc)]:
                return False
        return True

    def _ancestors(self, row: int) -> set[int]:
        out = {row}
        parent = self.trees.parent_of
        while parent[row] >= 0:
            row = int(parent[row])
            out.add(row)
        return out

    def _same_subtree(self, rows: set[int]) -> bool:
        if len(rows) == 1:
            return True
        common = set.intersection(*(self._ancestors(r) for r in rows))
        return bool(common & rows)

    # ------------------------------------------------------------ the answer
    def identity(self, combo: Combo) -> Key:
        mappings: dict[str, set[int]] = {}
        for row, slot in zip(combo, self.sup.slots):
            mappings.setdefault(slot.suffix, set()).add(row)
        return (frozenset(self.totals(combo).items()),
                frozenset((k, frozenset(v)) for k, v in mappings.items()))

    def roots_by_uuid(self, pre: np.ndarray) -> Iterator[int]:
        """Compact roots allowed by ``pre``, in uuid order."""
        pos = np.flatnonzero(pre)
        rows = self.trees.roots[pos]
        order = np.lexsort((self.ix.key_lo[rows], self.ix.key_hi[rows]))
        yield from pos[order].tolist()

    def allocation_request(self, key: Key) -> dict:
        u = self.ix.uuids
        allocs: dict[str, dict] = {}
        for (row, rc), n in sorted(key[0], key=lambda e: (u[e[0][0]], e[0][1])):
            allocs.setdefault(u[row], {"resources": {}})["resources"][rc] = n
        return {"allocations": allocs,
                "mappings": {k: sorted(u[r] for r in v) for k, v in sorted(key[1])}}

    def placement_answer(self, pre: np.ndarray,
                         rng: random.Random | int | None = None) -> dict:
        """The whole ``GET /allocation_candidates`` body (limit and
        randomize as in ``Enumerator.placement_answer``)."""
        request = self.sup.request
        limit = request.limit
        early = limit if limit is not None and not request.randomize else None
        seen: dict[Key, None] = {}
        for j in self.roots_by_uuid(pre):
            for combo in self.root_candidates(j):
                seen.setdefault(self.identity(combo))
            if early is not None and len(seen) >= early:
                break
        out = list(seen)
        if request.randomize:
            if not isinstance(rng, random.Random):
                rng = random.Random(rng)
            out = rng.sample(out, limit) if limit is not None and limit < len(out) \
                else rng.sample(out, len(out))
        elif limit is not None:
            out = out[:limit]
        used = {row for key in out for (row, _), _ in key[0]}
        tree_pos = {int(self.trees.root_pos[r]) for r in used}
        rows = [r for j in sorted(tree_pos) for r in self.trees.members(j).tolist()]
        return {"allocation_requests": [self.allocation_request(k) for k in out],
                "provider_summaries": self.ix.provider_summaries(rows)}

