"""The tree path of ``CapacityIndex``: its cached tree structure, and
``fit``/``candidates`` for requests on provider trees or with granular
groups (``supply`` -> ``TreeSolver`` / ``TreeEnumerator``). The caller
holds the index lock."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Sequence

import numpy as np

from scheduler_ext.engine import supply
from scheduler_ext.engine import trees as treelib
from scheduler_ext.engine.fit import Fit
from scheduler_ext.engine.tree_enumeration import TreeEnumerator
from scheduler_ext.engine.tree_solver import TreeSolver
from scheduler_ext.placement.query import CandidateRequest

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.engine.index import CapacityIndex


def state(ix: "CapacityIndex") -> tuple[treelib.Trees, treelib.TreeAggregates]:
    """The index's ``Trees`` and ``TreeAggregates``, rebuilt when rows
    appeared, died or moved (``structure_version``) or aggregates changed."""
    stamp = (ix.structure_version, ix.aggregates.version, ix.n_rows)
    cached = ix.tree_cache
    if cached is not None and cached[0] == stamp:
        return cached[1], cached[2]
    trees = cached[1] if cached is not None and cached[0][0::2] == stamp[0::2] \
        else treelib.build(ix)
    tagg = treelib.tree_aggregates(ix, trees)
    ix.tree_cache = (stamp, trees, tagg, {})
    return trees, tagg


def holders(ix: "CapacityIndex", rc: str) -> tuple[np.ndarray, np.ndarray] | None:
    """When no tree holds ``rc`` on more than one provider: per compact
    root the row holding it and its slot in the column (-1 for none);
    else None. Cached per tree structure and column version."""
    trees = state(ix)[0]
    col = ix.columns.get(rc)
    if col is None:
        return None
    cache = ix.tree_cache[3] if ix.tree_cache is not None else {}
    hit = cache.get(rc)
    if hit is None or hit[0] != col.version:
        rows = col.rows if col.sparse else np.flatnonzero(col.total[:trees.n] > 0)
        rows = rows[rows < trees.n]
        rows = rows[trees.root_pos[rows] >= 0]
        pos = trees.root_pos[rows]
        value = None
        if not len(pos) or int(np.bincount(pos).max()) <= 1:
            row = np.full(trees.n_roots, -1, np.int64)
            row[pos] = rows
            slot = np.full(trees.n_roots, -1, np.int64)
            slot[pos] = col.positions(rows)
            value = (row, slot)
        hit = cache[rc] = (col.version, value)
    return hit[1]


def members(ix: "CapacityIndex", rows: Sequence[int] | np.ndarray) -> np.ndarray:
    """Every live row of the trees holding ``rows``."""
    trees = state(ix)[0]
    pos = np.unique(trees.root_pos[np.asarray(rows, np.int64)])
    pos = pos[pos >= 0]
    return np.concatenate([trees.members(j) for j in pos.tolist()]
                          or [np.zeros(0, np.int64)])


def _parts(ix: "CapacityIndex", request: CandidateRequest):
    trees, tagg = state(ix)
    sharing = ix.solver.sharing_rows()
    sharing = sharing[sharing < trees.n]
    sharing = sharing[trees.root_of[sharing] >= 0]
    sup = supply.build(ix, trees, request, sharing, lambda rc: holders(ix, rc))
    solver = TreeSolver(ix, trees, tagg)
    return trees, sup, solver, TreeEnumerator(ix, trees, tagg, sup, solver)


def fit(ix: "CapacityIndex", request: CandidateRequest,
        freed: dict[tuple[int, str], int], include_sharing_roots: bool) -> Fit:
    """``CapacityIndex.fit`` on the tree path (``freed``: the released
    overlay in force)."""
    trees, sup, solver, enum = _parts(ix, request)
    pre = np.ones(trees.n_roots, bool)
    if not include_sharing_roots and ix.sharing_set:
        rows = ix.solver.sharing_rows()
        rows = rows[rows < trees.n]
        rows = rows[trees.root_of[rows] == rows]
        pre[trees.root_pos[rows]] = False
    picks = solver.solve(sup, pre, enum)
    sources: dict[str, np.ndarray] = {}
    granular: dict[str, np.ndarray] = {}
    for slot, rows in zip(sup.slots, picks.rows):
        if slot.suffix:
            granular[slot.suffix] = rows
        else:
            sources.update({rc: rows for rc in slot.amounts})
    return Fit(ix, request, trees.roots[picks.pos], sources, dict(freed), granular)


def answer(ix: "CapacityIndex", request: CandidateRequest,
           rng: random.Random | int | None) -> dict:
    """``CapacityIndex.candidates`` on the tree path."""
    trees, sup, solver, enum = _parts(ix, request)
    return enum.placement_answer(solver.possible(sup), rng)
