"""Who may supply each request group, as masks over provider rows
(placement 16.0.0's ``research_context`` filters, see
``docs/placement-nested-semantics.rst``).

A group is filled through *slots*: the unnumbered group has one slot per
resource class (each class comes from one provider: a member of the
anchor's tree or a sharing provider serving the tree); a granular group
has one slot (all its classes, or none, from one provider).

Per slot, ``local`` marks the rows that may fill it for their own tree and
``shared`` lists the sharing rows that may fill it for any tree with which
they share an aggregate. The filters:

* unnumbered group: capacity for the amount; no forbidden trait; every
  ``member_of`` list met by the provider itself *or* by its tree's root
  (for a sharing provider serving another tree: by itself); neither the
  provider nor the anchor root in a forbidden aggregate; ``in_tree``: only
  that tree, and no sharing. Required traits are met collectively, later.
* granular group: one provider meets everything itself: capacity for every
  class, each required trait group, no forbidden trait, ``member_of`` and
  forbidden aggregates on the provider only, ``in_tree`` on the provider.
  A resourceless group ignores ``in_tree`` and finds nothing unless it has
  required traits or ``member_of`` (placement 16.0.0 does so).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from scheduler_ext.engine.trees import Trees
from scheduler_ext.placement.query import CandidateRequest, RequestGroup

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.engine.index import CapacityIndex


@dataclasses.dataclass
class Slot:
    """One provider choice of a candidate: ``group`` (index into the
    request's groups), ``amounts`` it takes (class -> units), ``local``
    (bool per row), ``shared`` (sharing rows), ``score_rc`` (the class
    whose free units rank suppliers, None: uuid order only)."""

    group: int
    suffix: str
    amounts: dict[str, int]
    local: np.ndarray
    shared: np.ndarray
    score_rc: str | None


@dataclasses.dataclass
class Supply:
    """Every slot of a request and the anchors still possible.

    ``anchor`` (bool per compact root): the root passes ``root_required``,
    and the unnumbered group's forbidden aggregates and ``in_tree``.
    ``trait_groups``: the unnumbered group's required traits (met
    collectively by its slots' providers)."""

    request: CandidateRequest
    groups: tuple[RequestGroup, ...]
    slots: list[Slot]
    anchor: np.ndarray
    trait_groups: tuple[frozenset[str], ...]

    def unnumbered_slots(self) -> list[int]:
        return [i for i, s in enumerate(self.slots) if s.suffix == ""]


def _tree_of(ix: "CapacityIndex", trees: Trees, uuid: str | None) -> int:
    """Root row of the tree holding ``uuid`` (-2 when unknown here)."""
    row = ix.row_of.get(uuid or "")
    if row is None or row >= trees.n or trees.root_of[row] < 0:
        return -2
    return int(trees.root_of[row])


def _aggs_all(ix: "CapacityIndex", lists, n: int) -> np.ndarray | None:
    out = None
    for aggs in lists:
        m = ix.aggregates.member_mask(aggs, n)
        out = m if out is None else out & m
    return out


def build(ix: "CapacityIndex", trees: Trees, request: CandidateRequest) -> Supply:
    """The slots of ``request`` over the index (caller holds the lock)."""
    n = trees.n
    live = trees.root_of >= 0
    sharing = np.array(sorted(r for r in ix.sharing_set if r < n), np.int64)
    sharing = sharing[live[sharing]] if len(sharing) else sharing
    roots = trees.roots
    anchor = np.ones(len(roots), bool)
    if request.root_required:
        anchor &= ix.traits.all_of(request.root_required, n)[roots]
    if request.root_forbidden:
        anchor &= ~ix.traits.any_of(request.root_forbidden, n)[roots]
    slots: list[Slot] = []
    groups = request.groups
    for gi, group in enumerate(groups):
        if group.granular:
            slots.append(_granular(ix, trees, gi, group, live, sharing))
        else:
            anchor &= _unnumbered(ix, trees, gi, group, live, sharing, slots)
    return Supply(request, groups, slots, anchor,
                  request.trait_groups if request.resources else ())


def _unnumbered(ix: "CapacityIndex", trees: Trees, gi: int, group: RequestGroup,
                live: np.ndarray, sharing: np.ndarray, slots: list[Slot]) -> np.ndarray:
    """Append the unnumbered group's slots; return its anchor condition."""
    n = trees.n
    root_of = np.maximum(trees.root_of, 0)
    member = live.copy()
    if group.forbidden:
        member &= ~ix.traits.any_of(group.forbidden, n)
    direct = member.copy()      # a sharing provider serving another tree
    agg_ok = _aggs_all(ix, group.member_of, n)
    if agg_ok is not None:
        direct &= agg_ok
        member &= agg_ok | agg_ok[root_of]
    anchor = np.ones(trees.n_roots, bool)
    if group.forbidden_aggregates:
        bad = ix.aggregates.member_mask(group.forbidden_aggregates, n)
        direct &= ~bad
        member &= ~bad & ~bad[root_of]
        anchor &= ~bad[trees.roots]
    if group.in_tree is not None:
        tree = _tree_of(ix, trees, group.in_tree)
        member &= trees.root_of == tree
        anchor &= trees.roots == tree
        sharing = sharing[:0]
    for rc, amount in group.resources.items():
        col = ix.columns.get(rc)
        fit = col.fit_mask(amount, n) if col is not None else np.zeros(n, bool)
        shared = sharing[(fit & direct)[sharing]] if len(sharing) else sharing
        slots.append(Slot(gi, "", {rc: amount}, fit & member, shared, rc))
    return anchor


def _granular(ix: "CapacityIndex", trees: Trees, gi: int, group: RequestGroup,
              live: np.ndarray, sharing: np.ndarray) -> Slot:
    n = trees.n
    ok = live.copy()
    for names in group.trait_groups:
        ok &= ix.traits.any_of(names, n)
    if group.forbidden:
        ok &= ~ix.traits.any_of(group.forbidden, n)
    agg_ok = _aggs_all(ix, group.member_of, n)
    if agg_ok is not None:
        ok &= agg_ok
    if group.forbidden_aggregates:
        ok &= ~ix.aggregates.member_mask(group.forbidden_aggregates, n)
    if group.in_tree is not None:
        tree = _tree_of(ix, trees, group.in_tree)
        if group.resources or tree == -2:
            ok &= trees.root_of == tree
    if not group.resources and not group.trait_groups and not group.member_of:
        ok[:] = False
    for rc, amount in group.resources.items():
        col = ix.columns.get(rc)
        ok &= col.fit_mask(amount, n) if col is not None else False
    shared = sharing[ok[sharing]] if len(sharing) else sharing
    score = next(iter(group.resources), None)
    return Slot(gi, group.suffix, dict(group.resources), ok, shared, score)
