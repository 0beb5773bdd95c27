"""A same-host candidate that keeps the server where it physically is.

A resize on the same host does not move the server's disk to another
sharing provider, nor its devices to other child providers: each class the
server already holds stays on the provider that holds it. ``pinned`` builds
that candidate for one root from the engine's own pick (a ``Fit`` entry,
used only for what the server does not hold yet) and checks it against the
index with the old allocations released: capacity, min/max/step, and the
query's trait and aggregate filters over the providers it uses
(placement-semantics.md section 2). It never writes the index.

The unnumbered group keeps each class on the provider holding it (the
largest holder serving the root); the candidate is None when that does
not fit or breaks a filter. A granular group (a port's bandwidth, a vGPU)
is kept on a provider holding every class of the group, one provider per
group where the old allocations allow it; when those picks break the
group's own filters, ``group_policy=isolate`` or ``same_subtree``, or do
not fit, the engine's picks for the granular groups are used instead (the
old and new request groups are not matched by name: suffixes may change).
A device class (``placement.DEVICE_CLASSES``: vGPUs) is never kept: the new
flavor's devices are new ones, beside the old (``whole_devices``), so the
engine's pick serves it.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from scheduler_ext.engine.fit import Fit
from scheduler_ext.engine.fleet.rows import Rows
from scheduler_ext.engine.tree import supply
from scheduler_ext.placement import (DEVICE_CLASSES, WHOLE_DEVICE_TRAIT,
                                     Allocations)
from scheduler_ext.placement.query import CandidateRequest

#: (allocations ``{rp: {rc: n}}``, placement's ``mappings`` ``{suffix: [rp]}``)
Pinned = tuple[dict[str, dict[str, int]], dict[str, list[str]]]


def serves(index: Rows, rp: str, root: str) -> bool:
    """``rp`` supplies ``root``: it is the root, a provider of its tree, or
    a sharing provider in one of the root's aggregates."""
    row, root_row = index.row_of.get(rp), index.row_of.get(root)
    if row is None or root_row is None:
        return False
    if rp == root or index.tree.get(row, (None, None))[1] == root:
        return True
    return row in index.sharing_set and bool(
        index.aggregates.row_uuids(row) & index.aggregates.row_uuids(root_row))


def whole_devices(index: Rows,
                  *allocs: Allocations | None) -> frozenset[str]:
    """The providers of ``allocs`` that are devices the old and new flavor
    of a move never share: those allocated a ``DEVICE_CLASSES`` class
    (vGPUs), and whole devices (trait ``WHOLE_DEVICE_TRAIT``) of those the
    index knows."""
    mediated = frozenset(rp for a in allocs if a for rp, res in a.items()
                         if DEVICE_CLASSES.intersection(res))
    with index.lock:
        rows = {index.row_of[rp]: rp for a in allocs if a for rp in a
                if rp in index.row_of}
        if not rows:
            return mediated
        found = index.traits.any_of_rows(
            [WHOLE_DEVICE_TRAIT], np.fromiter(rows, np.int64, len(rows)))
    return mediated | frozenset(
        rp for rp, hit in zip(rows.values(), found.tolist()) if hit)


def pinned(index: Rows, fit: Fit, i: int, pin: Allocations,
           released: Allocations | None) -> Pinned | None:
    """The allocation of ``fit.request`` on root ``fit.rows[i]`` with what
    ``pin`` (the server's old allocations) holds on providers serving that
    root kept there (see the module docstring), the rest on the engine's
    pick ``i`` of ``fit``; None when it does not fit with ``released``
    treated as free, or breaks a filter of the request."""
    request = fit.request
    u = index.uuids
    root = u[int(fit.rows[i])]
    # a device class is never kept: the new flavor's devices are new ones
    # (``whole_devices``), on the engine's pick as nova's would be
    supplier = {rc: (None if rc in DEVICE_CLASSES
                     else _holder(index, pin, root, (rc,), set()))
                or u[int(fit.sources[rc][i])] for rc in request.resources}
    picks = {g.suffix: u[int(fit.granular[g.suffix][i])] for g in request.granular}
    kept = _kept_groups(index, request, root, pin, picks)
    with index.lock:
        if not _filters_pass(index, request, root, set(supplier.values())):
            return None
        for granular in ([kept, picks] if kept != picks else [picks]):
            allocs = _merged(request, supplier, granular)
            if _units_ok(index, request, supplier, granular) and \
                    _fits(index, allocs, released or {}) and \
                    _granular_pass(index, request, granular):
                mappings = {g: [rp] for g, rp in granular.items()}
                if supplier:
                    mappings[""] = sorted(set(supplier.values()))
                return allocs, mappings
    return None


def _holder(index: Rows, pin: Allocations, root: str,
            classes: Iterable[str], taken: set[str]) -> str | None:
    """The provider of ``pin`` serving ``root`` that holds every one of
    ``classes`` (most units first, one not ``taken`` before one that is,
    then by uuid); None if there is none."""
    classes = tuple(classes)
    holders = sorted(((rp in taken, -sum(res[rc] for rc in classes), rp)
                      for rp, res in pin.items()
                      if all(res.get(rc) for rc in classes)
                      and serves(index, rp, root)))
    return holders[0][2] if holders else None


def _kept_groups(index: Rows, request: CandidateRequest, root: str,
                 pin: Allocations, picks: Mapping[str, str]) -> dict[str, str]:
    """Per granular group the provider of ``pin`` to keep it on (its
    engine pick for a resourceless group or when none holds it)."""
    kept: dict[str, str] = {}
    taken: set[str] = set()
    for group in request.granular:
        rp = _holder(index, pin, root, group.resources, taken) \
            if group.resources and not DEVICE_CLASSES.intersection(
                group.resources) else None
        kept[group.suffix] = rp or picks[group.suffix]
        taken.add(kept[group.suffix])
    return kept


def _merged(request: CandidateRequest, supplier: Mapping[str, str],
            granular: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Amounts per provider and class over every group."""
    out: dict[str, dict[str, int]] = {}
    for rc, amount in request.resources.items():
        res = out.setdefault(supplier[rc], {})
        res[rc] = res.get(rc, 0) + amount
    for group in request.granular:
        for rc, amount in group.resources.items():
            res = out.setdefault(granular[group.suffix], {})
            res[rc] = res.get(rc, 0) + amount
    return out


def _units_ok(index: Rows, request: CandidateRequest,
              supplier: Mapping[str, str], granular: Mapping[str, str]) -> bool:
    """Each group's own amounts within min_unit, max_unit and step_size of
    the provider drawn on (placement checks them per group, before two
    groups' amounts on one provider are summed)."""
    asked = [(supplier[rc], rc, n) for rc, n in request.resources.items()]
    asked += [(granular[g.suffix], rc, n) for g in request.granular
              for rc, n in g.resources.items()]
    for rp, rc, amount in asked:
        col, row = index.columns.get(rc), index.row_of.get(rp)
        p = col.pos(row) if col is not None and row is not None else -1
        if col is None or p < 0 or not (
                col.min_unit[p] <= amount <= col.max_unit[p]
                and amount % col.step_size[p] == 0):
            return False
    return True


def _fits(index: Rows, allocs: Allocations,
          released: Allocations) -> bool:
    """The summed amounts within each provider's capacity (``released``
    counted free) and max_unit."""
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
            if not (amount <= col.max_unit[p]
                    and amount <= int(col.free[p]) + back):
                return False
    return True


def _filters_pass(index: Rows, request: CandidateRequest,
                  root: str, providers: set[str]) -> bool:
    """The unnumbered group's filters over the providers it uses."""
    if not providers:
        return True
    rows = np.array(sorted(index.row_of[rp] for rp in providers), np.int64)
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


def _granular_pass(index: Rows, request: CandidateRequest,
                   granular: Mapping[str, str]) -> bool:
    """Each granular group's filters on its provider, ``isolate`` and
    ``same_subtree`` over the groups' providers."""
    if not request.granular:
        return True
    trees = index.trees()
    rows = {s: index.row_of[rp] for s, rp in granular.items()}
    for group in request.granular:
        one = np.array([rows[group.suffix]], np.int64)
        if not supply.granular_filters_pass(index, trees, group, one)[0]:
            return False
    if request.isolate and len(set(rows.values())) < len(rows):
        return False
    for names in request.same_subtree:
        members = np.array([rows[s] for s in names if s in rows], np.int64)
        if len(members) and not any(trees.is_ancestor_or_self(
                np.full(len(members), top), members).all() for top in members):
            return False
    return True
