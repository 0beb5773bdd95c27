"""Provider trees of the index in numpy form.

``Trees`` is derived from the index's rows (``CapacityIndex.tree`` holds
``row -> (parent uuid, root uuid)`` of every nested row) and rebuilt only
when the structure changes (a provider appears, disappears or moves):

* ``root_of[row]``: the row of its tree's root (the row itself for a
  root), -1 for a dead row or one whose root the index does not hold (an
  orphan of a stale cache: it takes part in nothing);
* ``parent_of[row]``: the parent's row, -1 for a root;
* ``roots``: the live root rows, ascending; ``root_pos[row]``: the
  position in ``roots`` of the row's root (its *compact root index*);
* ``rank[row]``: the row's place in its tree by uuid (tie-breaks);
* ``members(j)``: the rows of the tree with compact root index ``j``.

So that "can the tree of each root supply X" stays vectorized: a bool
mask over rows becomes a per-root answer with one gather/scatter through
``root_pos`` (see ``best_per_root``). ``TreeAggregates`` holds the union of
the aggregates of every tree (a sharing provider serves a tree when any
member shares an aggregate with it).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

from scheduler_ext.engine.fleet.membership import AggregateSets

#: tie-break ranks are packed into the low bits of a preference key
RANK_BITS = 16
_RANK_SPAN = 1 << RANK_BITS
_SCORE_MAX = (1 << 46) - 1


@dataclasses.dataclass(frozen=True)
class Trees:
    """The tree structure of rows ``< n`` (see the module docstring)."""

    n: int
    nested: bool
    root_of: np.ndarray
    parent_of: np.ndarray
    roots: np.ndarray
    root_pos: np.ndarray
    rank: np.ndarray
    order: np.ndarray   # live rows by (root position, rank)
    start: np.ndarray   # members of root j: order[start[j]:start[j + 1]]
    depth: int          # longest parent chain
    orphans: bool = False  # some live row has no root here

    @property
    def n_roots(self) -> int:
        return len(self.roots)

    def members(self, j: int) -> np.ndarray:
        return self.order[self.start[j]:self.start[j + 1]]

    def is_ancestor_or_self(self, upper: np.ndarray, lower: np.ndarray) -> np.ndarray:
        """Bool per pair: ``upper[i]`` is ``lower[i]`` or one of its
        ancestors (``depth`` gathers)."""
        hit = upper == lower
        cur = lower.copy()
        for _ in range(self.depth):
            ok = cur >= 0
            cur[ok] = self.parent_of[cur[ok]]
            hit |= (cur == upper) & (cur >= 0)
        return hit


def build(n: int, alive: np.ndarray, tree: Mapping[int, tuple[str | None, str]],
          row_of: Mapping[str, int], key_hi: np.ndarray, key_lo: np.ndarray
          ) -> Trees:
    """Derive ``Trees`` from the index's rows: ``n`` rows, ``alive``,
    ``tree`` (row -> (parent uuid, root uuid) of nested rows), ``row_of``
    and the uuid keys ``key_hi``/``key_lo`` (O(n log n) when nested, O(n)
    when flat)."""
    alive = alive[:n]
    rows = np.arange(n, dtype=np.int64)
    parent_of = np.full(n, -1, np.int64)
    root_of = np.where(alive, rows, -1)
    for row, (parent, root) in tree.items():
        p, r = row_of.get(parent or ""), row_of.get(root)
        if alive[row] and p is not None and r is not None and alive[p] \
                and alive[r] and r not in tree:
            parent_of[row], root_of[row] = p, r
        else:
            root_of[row] = -1
    roots = np.flatnonzero(root_of == rows)
    root_pos = np.full(n, -1, np.int64)
    root_pos[roots] = np.arange(len(roots))
    live = root_of >= 0
    root_pos[live] = root_pos[root_of[live]]
    if not tree:
        return Trees(n, False, root_of, parent_of, roots, root_pos,
                     np.zeros(n, np.int64), roots, np.arange(len(roots) + 1), 0)
    orphans = bool((alive & (root_of < 0)).any())
    members = np.flatnonzero(live)
    order = members[np.lexsort((key_lo[members], key_hi[members],
                                root_pos[members]))]
    counts = np.bincount(root_pos[order], minlength=len(roots))
    start = np.zeros(len(roots) + 1, np.int64)
    np.cumsum(counts, out=start[1:])
    rank = np.zeros(n, np.int64)
    rank[order] = np.arange(len(order)) - start[root_pos[order]]
    return Trees(n, True, root_of, parent_of, roots, root_pos, rank, order,
                 start, _depth(parent_of), orphans)


def _depth(parent_of: np.ndarray) -> int:
    cur = np.flatnonzero(parent_of >= 0)
    depth = 0
    while len(cur) and depth < 64:
        depth += 1
        cur = parent_of[cur]
        cur = cur[parent_of[cur] >= 0]
    return depth


def preference_key(trees: Trees, rows: np.ndarray, free: np.ndarray) -> np.ndarray:
    """int64 per row: higher is preferred -- more free units, then the
    smaller uuid within its tree."""
    score = np.clip(free, 0, _SCORE_MAX)
    rank = np.minimum(trees.rank[rows], _RANK_SPAN - 1)
    return (score << RANK_BITS) | (_RANK_SPAN - 1 - rank)


def best_per_root(trees: Trees, rows: np.ndarray, key, one_per_tree: bool = False
                  ) -> np.ndarray:
    """int64 per compact root: the row of ``rows`` (live rows) with the
    highest ``key`` in that root's tree, -1 where the tree has none.
    ``key``: an int64 array per row, or a callable returning it (called
    only when some tree holds several of ``rows``; ``one_per_tree``: none
    does, nothing to compare). O(len(rows)) per round;
    as many rounds as the most rows one tree has among ``rows`` (a tree's
    best only improves from round to round)."""
    out = np.full(trees.n_roots, -1, np.int64)
    if not len(rows):
        return out
    pos = trees.root_pos[rows]
    if one_per_tree or (len(pos) > 1 and (pos[1:] > pos[:-1]).all()):
        out[pos] = rows   # no tree holds two of ``rows``
        return out
    best = np.full(trees.n_roots, -1, np.int64)
    idx = np.arange(len(rows))
    best[pos] = idx
    if not (best[pos] == idx).all():
        key = key() if callable(key) else key
        while True:
            better = np.flatnonzero(key > key[best[pos]])
            if not len(better):
                break
            best[pos[better]] = better
    has = best >= 0
    out[has] = rows[best[has]]
    return out


def count_per_root(trees: Trees, rows: np.ndarray) -> np.ndarray:
    """int64 per compact root: how many of ``rows`` its tree holds."""
    return np.bincount(trees.root_pos[rows], minlength=trees.n_roots)


@dataclasses.dataclass(frozen=True)
class TreeAggregates:
    """Aggregate ids per tree (the union over its members): ``single[j]``
    is the id when tree ``j`` has exactly one, 0 for none, -1 for several;
    (``pos``, ``agg``) list every (tree, aggregate) pair, sorted by tree."""

    single: np.ndarray
    pos: np.ndarray
    agg: np.ndarray

    @property
    def several(self) -> tuple[np.ndarray, np.ndarray]:
        """(pos, agg) of the pairs of trees with several aggregates."""
        cached = self.__dict__.get("_several")
        if cached is None:
            keep = self.single[self.pos] < 0
            cached = (self.pos[keep], self.agg[keep])
            object.__setattr__(self, "_several", cached)
        return cached

    @property
    def single_or_none(self) -> np.ndarray:
        """``single`` with 0 (no aggregate) for trees with several."""
        cached = self.__dict__.get("_single_or_none")
        if cached is None:
            cached = np.maximum(self.single, 0)
            object.__setattr__(self, "_single_or_none", cached)
        return cached

    def of(self, j: int) -> np.ndarray:
        lo, hi = np.searchsorted(self.pos, [j, j + 1])
        return self.agg[lo:hi]


def tree_aggregates(aggregates: AggregateSets, trees: Trees) -> TreeAggregates:
    """The aggregates of every tree, from the index's aggregate entries
    (O(entries log entries))."""
    e_row, e_agg = aggregates.entries()
    keep = (e_agg > 0) & (e_row < trees.n)
    e_row, e_agg = e_row[keep].astype(np.int64), e_agg[keep].astype(np.int64)
    pos = trees.root_pos[e_row]
    ok = pos >= 0
    width = int(e_agg.max()) + 1 if len(e_agg) else 1
    pairs = np.unique(pos[ok] * width + e_agg[ok])
    pos, agg = pairs // width, pairs % width
    counts = np.bincount(pos, minlength=trees.n_roots)
    single = np.zeros(trees.n_roots, np.int64)
    one = np.flatnonzero(counts == 1)
    single[one] = agg[np.searchsorted(pos, one)]
    single[counts > 1] = -1
    return TreeAggregates(single, pos, agg)
