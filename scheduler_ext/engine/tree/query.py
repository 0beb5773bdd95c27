"""The tree path's entry point: the index's cached tree structure, and
``fit``/``candidates`` for requests on provider trees or with granular
groups (``supply`` -> ``TreeSolver`` / ``TreeEnumerator``). The caller
holds the index lock."""

from __future__ import annotations

import functools
import random
from typing import Any, Callable, Sequence

import numpy as np

from scheduler_ext.engine.fit import Fit
from scheduler_ext.engine.fleet import trees as treelib
from scheduler_ext.engine.fleet.columns import as_slice
from scheduler_ext.engine.fleet.rows import Rows
from scheduler_ext.engine.tree import supply
from scheduler_ext.engine.tree.enumeration import TreeEnumerator
from scheduler_ext.engine.tree.solver import TreeSolver
from scheduler_ext.placement.query import CandidateRequest


def state(ix: Rows) -> tuple[treelib.Trees, treelib.TreeAggregates]:
    """The index's ``Trees`` and ``TreeAggregates``, rebuilt when rows
    appeared, died or moved (``structure_version``) or aggregates changed."""
    stamp = (ix.structure_version, ix.aggregates.version, ix.n_rows)
    cached = ix.tree_cache
    if cached is not None and cached[0] == stamp:
        return cached[1], cached[2]
    trees = cached[1] if cached is not None and cached[0][0::2] == stamp[0::2] \
        else treelib.build(ix.n_rows, ix.alive, ix.tree, ix.row_of, ix.key_hi, ix.key_lo)
    tagg = treelib.tree_aggregates(ix.aggregates, trees)
    ix.tree_cache = (stamp, trees, tagg, {})
    return trees, tagg


#: classes some tree holds on more providers than this go row by row
MAX_HOLDERS = 4


def holders(ix: Rows, rc: str) -> tuple[Any, ...] | None:
    """(rows, slots): per compact root the rows of its tree holding ``rc``
    and their slots in the column, as (k x n_roots) matrices padded with
    -1 (k: the most holders one tree has; row j of the matrix: each tree's
    j-th holder in uuid order); None when k > ``MAX_HOLDERS``. With k = 1
    two more list the trees holding it compactly: their compact root
    positions and their holders' slots, each a slice when it is a
    progression, as when every root holds the class.
    Cached per tree structure and column version."""
    trees = state(ix)[0]
    col = ix.columns.get(rc)
    if col is None:
        return None
    cache = ix.tree_cache[3] if ix.tree_cache is not None else {}
    hit = cache.get(rc)
    if hit is None or hit[0] != col.version:
        hit = cache[rc] = (col.version, _holder_matrix(trees, col))
    return hit[1]


def _holder_matrix(trees: treelib.Trees, col) -> tuple[Any, ...] | None:
    rows = col.rows if col.sparse else np.flatnonzero(col.total[:trees.n] > 0)
    rows = rows[rows < trees.n]
    rows = rows[trees.root_pos[rows] >= 0]
    pos = trees.root_pos[rows]
    counts = np.bincount(pos, minlength=trees.n_roots)
    k = int(counts.max()) if len(counts) else 0
    if k > MAX_HOLDERS:
        return None
    k = max(k, 1)
    order = np.lexsort((trees.rank[rows], pos))
    rows, pos = rows[order], pos[order]
    start = np.zeros(trees.n_roots + 1, np.int64)
    np.cumsum(counts, out=start[1:])
    col_of = np.arange(len(rows)) - start[pos]
    matrix = np.full((k, trees.n_roots), -1, np.int64)
    matrix[col_of, pos] = rows
    slots = np.full((k, trees.n_roots), -1, np.int64)
    slots[col_of, pos] = col.positions(rows)
    if k == 1:   # and the trees holding it, compact: (positions, slots)
        return matrix, slots, as_slice(pos), as_slice(slots[0][pos])
    return matrix, slots


def memo(ix: Rows, key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()`` cached with the tree structure under ``key``, which
    must name every version the value depends on besides the structure
    and the aggregates (trait and column versions)."""
    state(ix)
    cache = ix.tree_cache[3] if ix.tree_cache is not None else {}
    if key not in cache:
        if len(cache) > 512:   # versions moved on: drop what is stale
            cache.clear()
        cache[key] = compute()
    return cache[key]


def members(ix: Rows, rows: Sequence[int] | np.ndarray) -> np.ndarray:
    """Every live row of the trees holding ``rows``."""
    trees = state(ix)[0]
    pos = np.unique(trees.root_pos[np.asarray(rows, np.int64)])
    pos = pos[pos >= 0]
    return np.concatenate([trees.members(j) for j in pos.tolist()]
                          or [np.zeros(0, np.int64)])


def _parts(ix: Rows, request: CandidateRequest):
    trees, tagg = state(ix)
    sharing = ix.sharing_rows()
    sharing = sharing[sharing < trees.n]
    sharing = sharing[trees.root_of[sharing] >= 0]
    sup = supply.build(ix, trees, request, sharing, lambda rc: holders(ix, rc),
                       lambda key, compute: memo(ix, key, compute))
    solver = TreeSolver(ix, trees, tagg)
    return trees, sup, solver, TreeEnumerator(ix, trees, tagg, sup, solver)


def fit(ix: Rows, request: CandidateRequest,
        freed: dict[tuple[int, str], int], include_sharing_roots: bool) -> Fit:
    """``CapacityIndex.fit`` on the tree path (``freed``: the released
    overlay in force)."""
    trees, sup, solver, enum = _parts(ix, request)
    pre = np.ones(trees.n_roots, bool)
    if not include_sharing_roots and ix.sharing_set:
        rows = ix.sharing_rows()
        rows = rows[rows < trees.n]
        rows = rows[trees.root_of[rows] == rows]
        pre[trees.root_pos[rows]] = False
    picks = solver.solve(sup, pre, enum)
    sources: dict[str, np.ndarray] = {}
    granular: dict[str, np.ndarray] = {}
    quick = {}
    for slot, rows in zip(sup.slots, picks.rows):
        if slot.suffix:
            granular[slot.suffix] = rows
            continue
        sources.update({rc: rows for rc in slot.amounts})
        if slot.holder is not None and not len(slot.shared) and slot.score_rc:
            # the supplier is the tree's one holder, whose slot is known
            quick[slot.score_rc] = functools.partial(
                _holder_free, ix, slot.score_rc, picks.pos, _stamp(ix, slot.score_rc))
    return Fit(ix, request, trees.roots[picks.pos], sources, dict(freed), granular,
               quick)


def _stamp(ix: Rows, rc: str) -> tuple:
    col = ix.columns.get(rc)
    return (ix.structure_version, ix.aggregates.version, ix.n_rows, id(col),
            col.version if col is not None else -1)


def _holder_free(ix: Rows, rc: str, pos: np.ndarray, stamp: tuple
                 ) -> np.ndarray | None:
    """Free units of ``rc`` at the one holder in each tree at compact root
    positions ``pos`` (each holds ``rc``): one gather where the holders
    sit in root order in the column, as compute nodes usually do. None
    when the trees or the holders changed since ``stamp``."""
    with ix.lock:
        if _stamp(ix, rc) != stamp:
            return None
        hold = holders(ix, rc)
        assert hold is not None and len(hold) == 4
        free = ix.columns[rc].free
        at, slots = hold[2], hold[3]
        if isinstance(at, slice) and isinstance(slots, slice) and at.step == slots.step == 1:
            return free[pos + (slots.start - at.start)] if slots.start != at.start \
                else free[pos]
        return free[hold[1][0][pos]]


def answer(ix: Rows, request: CandidateRequest,
           rng: random.Random | int | None) -> dict:
    """``CapacityIndex.candidates`` on the tree path."""
    trees, sup, solver, enum = _parts(ix, request)
    return enum.placement_answer(solver.possible(sup), rng)
