"""Who may supply each request group, as provider rows (placement
16.0.0's ``research_context`` filters, see
``docs/placement-nested-semantics.rst``).

A group is filled through *slots*: the unnumbered group has one slot per
resource class (each class comes from one provider: a member of the
anchor's tree or a sharing provider serving the tree); a granular group
has one slot (all its classes, or none, from one provider).

Per slot, ``rows`` are the rows that may fill it for their own tree
(ascending) and ``shared`` the sharing rows that may fill it for any tree
with which they share an aggregate. The filters:

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

Work is done over the slots of the columns asked for, not over every
provider row, where the request has no row-wide filter.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from scheduler_ext.engine.fleet.columns import as_slice
from scheduler_ext.engine.fleet.rows import Rows
from scheduler_ext.engine.fleet.trees import Trees, best_per_root
from scheduler_ext.engine.tree.branchless import choose, compact, keep
from scheduler_ext.placement.query import CandidateRequest, RequestGroup

_NONE = np.zeros(0, np.int64)


@dataclasses.dataclass
class Slot:
    """One provider choice of a candidate: ``group`` (index into the
    request's groups), ``amounts`` it takes (class -> units), ``rows``
    (ascending) and ``free`` (units of ``score_rc`` free at each, None
    without a class) of the tree members that may fill it, ``shared``
    (sharing rows), ``score_rc`` (the class whose free units rank
    suppliers). ``best``: when no tree holds two of ``rows``, the row per
    compact root (-1 none), and ``rows`` are then derived on demand.
    ``holder``/``holder_ok``: the same as ``best`` in two parts where each
    tree has at most one provider that could fill the slot: that provider
    per compact root (-1 none; cached, shared between requests) and bool
    per compact root, does it fit now. ``member()`` gives either form."""

    group: int
    suffix: str
    amounts: dict[str, int]
    shared: np.ndarray
    score_rc: str | None
    n: int
    found: tuple[np.ndarray, np.ndarray | None] | None = None
    derive: Callable[[], tuple[np.ndarray, np.ndarray | None]] | None = None
    best: np.ndarray | None = None
    holder: np.ndarray | None = None
    holder_ok: np.ndarray | None = None
    _mask: np.ndarray | None = None

    def member(self, trees: Trees, key: Callable[[], np.ndarray]
               ) -> tuple[np.ndarray, np.ndarray]:
        """(row per compact root, bool per compact root): the best member
        of the root's tree that may fill the slot, and where there is one
        (the row is meaningless where there is not). ``key()``: the
        preference key of ``rows``, asked only when a tree holds several."""
        if self.holder is not None and self.holder_ok is not None:
            return self.holder, self.holder_ok
        if self.best is None:
            self.best = best_per_root(trees, self.rows, key)
        return self.best, self.best >= 0

    @property
    def rows(self) -> np.ndarray:
        if self.found is None:
            assert self.derive is not None
            self.found = self.derive()
        return self.found[0]

    @property
    def free(self) -> np.ndarray | None:
        self.rows  # noqa: B018 (derives them)
        assert self.found is not None
        return self.found[1]

    @property
    def local(self) -> np.ndarray:
        """Bool per row: may fill this slot for its own tree."""
        if self._mask is None:
            self._mask = np.zeros(self.n, bool)
            self._mask[self.rows] = True
        return self._mask


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


def _tree_of(ix: Rows, trees: Trees, uuid: str | None) -> int:
    """Root row of the tree holding ``uuid`` (-2 when unknown here)."""
    row = ix.row_of.get(uuid or "")
    if row is None or row >= trees.n or trees.root_of[row] < 0:
        return -2
    return int(trees.root_of[row])


def _aggs_all(ix: Rows, lists, n: int) -> np.ndarray | None:
    out = None
    for aggs in lists:
        m = ix.aggregates.member_mask(aggs, n)
        out = m if out is None else out & m
    return out


def among(sorted_rows: np.ndarray, rows: np.ndarray,
          ok: np.ndarray | None = None) -> np.ndarray:
    """The entries of ``rows`` that are in ``sorted_rows`` (ascending), and
    where ``ok`` (bool per entry of ``sorted_rows``) when given."""
    if not len(rows) or not len(sorted_rows):
        return rows[:0]
    pos = np.minimum(np.searchsorted(sorted_rows, rows), len(sorted_rows) - 1)
    found = sorted_rows[pos] == rows
    return rows[found if ok is None else found & ok[pos]]


def fitting(ix: Rows, trees: Trees, rc: str, amount: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """(rows ascending, free units of ``rc`` there) of the live rows where
    ``amount`` of ``rc`` fits."""
    col = ix.columns.get(rc)
    if col is None:
        return _NONE, _NONE
    ok = col.fit_slots(amount)
    if col.sparse:
        rows, free = col.rows[ok], col.free[ok]
    else:
        rows = np.flatnonzero(ok[:trees.n])
        free = col.free[rows]
    if trees.orphans:
        live = trees.root_of[rows] >= 0
        rows, free = rows[live], free[live]
    return rows, free


def _no_memo(key: tuple, compute: Callable):
    return compute()


def build(ix: Rows, trees: Trees, request: CandidateRequest,
          sharing: np.ndarray, holders: Callable = lambda rc: None,
          memo: Callable = _no_memo) -> Supply:
    """The slots of ``request`` over the index (``sharing``: the live
    sharing rows, ascending; ``holders(rc)``: see ``query.holders``;
    ``memo(key, compute)``: a cache of what depends only on the versions
    named in ``key``; the caller holds the lock)."""
    n = trees.n
    roots = trees.roots
    anchor = np.ones(len(roots), bool)
    if request.root_required or request.root_forbidden:
        anchor = memo(("anchor", request.root_required, request.root_forbidden,
                       ix.traits.version),
                      lambda: ix.traits.match([[t] for t in request.root_required],
                                              request.root_forbidden, rows=roots))
    slots: list[Slot] = []
    groups = request.groups
    for gi, group in enumerate(groups):
        if group.granular:
            slots.append(_granular(ix, trees, gi, group, sharing, memo))
        else:
            # not in place: ``anchor`` may be the memo's own array
            anchor = anchor & _unnumbered(ix, trees, gi, group, sharing, slots, holders)
    return Supply(request, groups, slots, anchor,
                  request.trait_groups if request.resources else ())


def fitting_among(ix: Rows, rc: str, amount: int, rows: np.ndarray
                  ) -> np.ndarray:
    """The entries of ``rows`` where ``amount`` of ``rc`` fits."""
    col = ix.columns.get(rc)
    if col is None or not len(rows):
        return rows[:0]
    return rows[col.fits_at(col.positions(rows), amount)]


def _unnumbered(ix: Rows, trees: Trees, gi: int, group: RequestGroup,
                sharing: np.ndarray, slots: list[Slot], holders: Callable) -> np.ndarray:
    """Append the unnumbered group's slots; return its anchor condition."""
    n = trees.n
    member: np.ndarray | None = None   # a tree member for its own tree
    direct: np.ndarray | None = None   # a sharing provider for another tree
    root_of = np.maximum(trees.root_of, 0) if (
        group.member_of or group.forbidden_aggregates) else trees.root_of
    if group.forbidden:
        member = ix.traits.match((), group.forbidden, n)
        direct = member.copy()
    agg_ok = _aggs_all(ix, group.member_of, n)
    if agg_ok is not None:
        direct = agg_ok if direct is None else direct & agg_ok
        inherit = agg_ok | agg_ok[root_of]
        member = inherit if member is None else member & inherit
    anchor = np.ones(trees.n_roots, bool)
    if group.forbidden_aggregates:
        bad = ix.aggregates.member_mask(group.forbidden_aggregates, n)
        direct = ~bad if direct is None else direct & ~bad
        clean = ~bad & ~bad[root_of]
        member = clean if member is None else member & clean
        anchor &= ~bad[trees.roots]
    if group.in_tree is not None:
        tree = _tree_of(ix, trees, group.in_tree)
        inside = trees.root_of == tree
        member = inside if member is None else member & inside
        anchor &= trees.roots == tree
        sharing = sharing[:0]
    for rc, amount in group.resources.items():
        shared = fitting_among(ix, rc, amount, sharing)
        if direct is not None and len(shared):
            shared = shared[direct[shared]]

        def derive(rc=rc, amount=amount) -> tuple[np.ndarray, np.ndarray | None]:
            rows, free = fitting(ix, trees, rc, amount)
            if member is not None:
                inside = member[rows]
                rows, free = rows[inside], free[inside]
            return rows, free
        slot = Slot(gi, "", {rc: amount}, shared, rc, n, derive=derive)
        hold = holders(rc)
        if hold is not None and len(hold[0]) == 1 and member is None:
            slot.holder = hold[0][0]
            slot.holder_ok = _holder_fits(ix.columns[rc], hold, amount, trees.n_roots)
        elif hold is not None:
            matrix, at = hold[0], hold[1]
            ok = ix.columns[rc].fits_at(at.ravel(), amount).reshape(at.shape)
            if member is not None:
                ok &= member[np.maximum(matrix, 0)]
            slot.best = matrix_best(ix, matrix, at, ok, rc)
        else:
            slot.found = derive()
        slots.append(slot)
    return anchor


def _granular_ok(ix: Rows, trees: Trees, group: RequestGroup,
                 rows: np.ndarray) -> np.ndarray:
    """Bool per entry of ``rows``: the provider meets the group's traits,
    aggregates, ``in_tree`` and every class but the first."""
    n = trees.n
    ok = np.ones(len(rows), bool)
    if group.trait_groups or group.forbidden:
        ok &= ix.traits.match(group.trait_groups, group.forbidden, rows=rows)
    agg_ok = _aggs_all(ix, group.member_of, n)
    if agg_ok is not None:
        ok &= agg_ok[rows]
    if group.forbidden_aggregates:
        ok &= ~ix.aggregates.member_mask(group.forbidden_aggregates, n)[rows]
    if group.in_tree is not None:
        tree = _tree_of(ix, trees, group.in_tree)
        if group.resources or tree == -2:
            ok &= trees.root_of[rows] == tree
    for rc, amount in list(group.resources.items())[1:]:
        col = ix.columns.get(rc)
        if col is None:
            return np.zeros(len(rows), bool)
        ok &= col.fits_at(col.positions(rows), amount)
    return ok


def granular_filters_pass(ix: Rows, trees: Trees, group: RequestGroup,
                          rows: np.ndarray) -> np.ndarray:
    """Bool per entry of ``rows``: the provider meets the group's traits,
    aggregates and ``in_tree`` (capacity is not looked at)."""
    bare = RequestGroup(group.suffix, {}, group.required, group.forbidden,
                        group.required_any, group.member_of,
                        group.forbidden_aggregates, group.in_tree)
    ok = _granular_ok(ix, trees, bare, rows)
    if group.resources and group.in_tree is not None:
        ok &= trees.root_of[rows] == _tree_of(ix, trees, group.in_tree)
    return ok


def _holder_fits(col, hold, amount: int, n_roots: int) -> np.ndarray:
    """Bool per compact root: its tree's one holder of the class (see
    ``query.holders``) has room for ``amount``."""
    pos, slots = hold[2:4]
    ok = np.zeros(n_roots, bool)
    ok[pos] = col.fits_at(slots, amount, present=True)
    return ok


def matrix_best(ix: Rows, matrix: np.ndarray, slots: np.ndarray,
                ok: np.ndarray, rc: str) -> np.ndarray:
    """Per compact root the best row of ``matrix`` (see
    ``query.holders``) where ``ok``: most free units of ``rc``, then
    the smaller uuid; -1 where none is ok. One pass per matrix row."""
    best = keep(matrix[0], ok[0])
    if len(matrix) == 1:
        return best
    free = ix.columns[rc].free
    best_free = keep(free[slots[0]], ok[0])
    for j in range(1, len(matrix)):
        f = free[slots[j]]
        better = ok[j] & (f > best_free)
        best = choose(better, matrix[j], best)
        best_free = choose(better, f, best_free)
    return best


def _granular(ix: Rows, trees: Trees, gi: int, group: RequestGroup,
              sharing: np.ndarray, memo: Callable) -> Slot:
    amounts = dict(group.resources)
    if not amounts:
        # resourceless: placement 16.0.0 finds nothing without traits or
        # aggregates to look for
        rows = np.flatnonzero(trees.root_of >= 0) \
            if group.trait_groups or group.member_of else _NONE
        rows = rows[_granular_ok(ix, trees, group, rows)]
        return Slot(gi, group.suffix, amounts, among(rows, sharing), None, trees.n,
                    found=(rows, None))
    rc, amount = next(iter(amounts.items()))
    if any(c not in ix.columns for c in amounts):
        return Slot(gi, group.suffix, amounts, _NONE, rc, trees.n, found=(_NONE, _NONE))
    cols = [ix.columns[c] for c in amounts]
    key = ("granular", group.trait_groups, group.forbidden, group.member_of,
           group.forbidden_aggregates, group.in_tree, tuple(amounts),
           tuple(col.version for col in cols), ix.traits.version)
    rows, at, pos, holder = memo(key, lambda: _granular_static(ix, trees, group, cols))
    ok = np.ones(len(rows), bool)
    for col, n, slots in zip(cols, amounts.values(), at):
        ok &= col.fits_at(slots, n, present=True)

    def derive() -> tuple[np.ndarray, np.ndarray | None]:
        fit_rows, first = compact(ok, rows, cols[0].free[at[0]])
        return fit_rows, first
    slot = Slot(gi, group.suffix, amounts, among(rows, sharing, ok), rc, trees.n,
                derive=derive)
    if holder is not None:   # one provider per tree: the best is that one
        slot.holder, slot.holder_ok = holder, np.zeros(trees.n_roots, bool)
        slot.holder_ok[pos] = ok
    return slot


def _granular_static(ix: Rows, trees: Trees, group: RequestGroup,
                     cols: list) -> tuple[np.ndarray, list, Any, np.ndarray | None]:
    """(rows ascending, their slots in each of ``cols``, their compact root
    positions, and the row per compact root (-1 none); the last two None
    when a tree holds two) of the live providers holding every class of
    the group and meeting its traits, aggregates and ``in_tree``: what
    does not change with usage. Slots and positions are slices where they
    are progressions (``columns.as_slice``)."""
    first = cols[0]
    rows = first.rows if first.sparse else np.flatnonzero(first.total[:trees.n] > 0)
    rows = rows[rows < trees.n]
    rows = rows[trees.root_of[rows] >= 0]
    rows = rows[granular_filters_pass(ix, trees, group, rows)]
    at = [col.positions(rows) for col in cols]
    held = np.all([a >= 0 for a in at], axis=0) if len(rows) else np.zeros(0, bool)
    rows = rows[held]
    pos = trees.root_pos[rows]
    at = [as_slice(a[held]) for a in at]
    if len(pos) > 1 and not (pos[1:] > pos[:-1]).all():
        return rows, at, None, None
    holder = np.full(trees.n_roots, -1, np.int64)
    holder[pos] = rows
    return rows, at, as_slice(pos), holder
