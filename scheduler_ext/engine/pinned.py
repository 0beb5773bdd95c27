"""A same-host candidate that keeps the server where it physically is.

A resize on the same host does not move the server's disk to another
sharing provider, nor its devices to other child providers: each class the
server already holds stays on the provider that holds it. ``pinned`` builds
that candidate for one root from the engine's own pick (used only for the
classes the server does not hold yet) and checks it against the index with
the old allocations released: capacity, min/max/step, and the query's trait
and aggregate filters over the providers it uses (placement-semantics.md
section 2). It never writes the index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import numpy as np

from scheduler_ext.placement import Allocations
from scheduler_ext.placement.query import CandidateRequest

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.engine.index import CapacityIndex


def serves(index: "CapacityIndex", rp: str, root: str) -> bool:
    """``rp`` supplies ``root``: it is the root, a provider of its tree, or
    a sharing provider in one of the root's aggregates."""
    row, root_row = index.row_of.get(rp), index.row_of.get(root)
    if row is None or root_row is None:
        return False
    if rp == root or index.tree.get(row, (None, None))[1] == root:
        return True
    return row in index.sharing_set and bool(
        index.aggregates.row_uuids(row) & index.aggregates.row_uuids(root_row))


def pinned(index: "CapacityIndex", request: CandidateRequest, root: str,
           base: Mapping[str, str], pin: Allocations,
           released: Allocations | None) -> dict[str, dict[str, int]] | None:
    """The allocation of ``request`` on ``root`` with every class that
    ``pin`` (the server's old allocations) holds on a provider serving
    ``root`` kept on that provider (the largest holder), the other classes
    on ``base[rc]`` (the engine's pick); None when it does not fit with
    ``released`` treated as free, or breaks a filter of ``request``."""
    supplier: dict[str, str] = {}
    for rc in request.resources:
        holders = sorted(((res[rc], rp) for rp, res in pin.items()
                          if res.get(rc) and serves(index, rp, root)),
                         key=lambda h: (-h[0], h[1]))
        supplier[rc] = holders[0][1] if holders else base[rc]
    out: dict[str, dict[str, int]] = {}
    for rc, amount in request.resources.items():
        out.setdefault(supplier[rc], {})[rc] = amount
    with index.lock:
        if not (_fits(index, out, released or {})
                and _filters_pass(index, request, root, out)):
            return None
    return out


def _fits(index: "CapacityIndex", allocs: Allocations,
          released: Allocations) -> bool:
    for rp, res in allocs.items():
        row = index.row_of.get(rp)
        if row is None or not index.alive[row]:
            return False
        for rc, amount in res.items():
            col = index.columns.get(rc)
            p = col.pos(row) if col is not None else -1
            if p < 0 or col is None or col.total[p] == 0:
                return False
            back = released.get(rp, {}).get(rc, 0)
            if not (col.min_unit[p] <= amount <= col.max_unit[p]
                    and amount % col.step_size[p] == 0
                    and amount <= int(col.free[p]) + back):
                return False
    return True


def _filters_pass(index: "CapacityIndex", request: CandidateRequest,
                  root: str, allocs: Allocations) -> bool:
    rows = np.array(sorted(index.row_of[rp] for rp in allocs), np.int64)
    root_row = index.row_of[root]
    traits, aggs = index.traits, index.aggregates
    if request.forbidden and traits.any_of_rows(request.forbidden, rows).any():
        return False
    for group in request.trait_groups:
        if not traits.any_of_rows(group, rows).any():
            return False
    if request.in_tree is not None and any(
            int(r) in index.sharing_set for r in rows):
        return False
    for row in rows.tolist():
        mine = aggs.row_uuids(row)
        if row not in index.sharing_set:
            mine = mine | aggs.row_uuids(root_row)
        if any(not (mine & frozenset(a.lower() for a in group))
               for group in request.member_of):
            return False
        if mine & request.forbidden_aggregates:
            return False
    return True

