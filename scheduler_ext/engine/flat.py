"""The flat path: anchor roots of a fleet where every provider is a root,
asked the unnumbered group only (``CapacityIndex`` sends everything else
to ``engine.tree``).

* ``Solver``: which roots fit, vectorized -- the masks of
  placement-semantics.md section 2 and the choice of one candidate per
  root;
* ``Enumerator``: exact enumeration in placement's shape (the slow, full
  path, and the solver's fallback past ``MAX_COMBINATIONS``). For each
  anchor root still possible after the masks, the suppliers of each
  requested class are the root itself (if it may supply the class) and
  every sharing provider that may supply it and shares an aggregate with
  the root. One candidate is one supplier per class (a class is never
  split); their cross product, kept when the suppliers together meet every
  required trait group, de-duplicated across anchors (a candidate is its
  allocations, not its anchor).

Both read the index's row storage (``fleet.rows.Rows``) and never write
it. The caller holds the index lock.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from typing import Iterator

import numpy as np

from scheduler_ext import errors
from scheduler_ext.engine.fleet.rows import Rows
from scheduler_ext.placement import validation
from scheduler_ext.placement.query import CandidateRequest

#: Above this many (local/sharing x trait-mask) choice combinations the
#: fast path falls back to exact per-root enumeration.
MAX_COMBINATIONS = 256
_BIG = np.iinfo(np.int64).max

#: Root rows ascending, and per class the supplying row of each root.
Solution = tuple[np.ndarray, dict[str, np.ndarray]]


@dataclasses.dataclass
class Evaluation:
    """Per-query masks over provider rows ``< n`` (see ``Solver.evaluate``)."""

    request: CandidateRequest
    n: int
    rcs: list[str]
    local: dict[str, np.ndarray]   # rc -> bool[n]: may supply rc itself
    shared: dict[str, np.ndarray]  # rc -> sharing rows that may supply rc
    pre: np.ndarray                # bool[n]: anchors not ruled out yet
    groups: tuple[frozenset[str], ...]


class Solver:
    """Query evaluation over one index's arrays (see module docstring)."""

    def __init__(self, index: Rows):
        self.ix = index
        self._sharing: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    # -------------------------------------------------------------- sharing
    def forget_sharing(self) -> None:
        """The sharing providers or their aggregates changed."""
        self._sharing = None

    def sharing_rows(self) -> np.ndarray:
        """Sorted rows of the sharing providers."""
        return self._sharing_entries()[0]

    def _sharing_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sorted sharing rows, entry -> index into them, entry -> aggregate)."""
        if self._sharing is None:
            rows = np.array(sorted(self.ix.sharing_set), np.int64)
            pos, agg = [], []
            for i, r in enumerate(rows.tolist()):
                for a in self.ix.aggregates.sets[r]:
                    pos.append(i)
                    agg.append(a)
            self._sharing = (rows, np.array(pos, np.int64), np.array(agg, np.int64))
        return self._sharing

    def preference(self, rows: np.ndarray, rc: str) -> np.ndarray:
        """``rows`` ordered best first for supplying ``rc``: most free units,
        then uuid."""
        ix = self.ix
        free = ix.columns[rc].gather("free", rows)
        return rows[np.lexsort((ix.key_lo[rows], ix.key_hi[rows], -free))]

    def _best_reachable(self, supply: np.ndarray, rc: str,
                        rows: np.ndarray) -> np.ndarray:
        """int64 per entry of ``rows``: the best (``preference``) row of
        the sharing rows ``supply`` that shares an aggregate with it, -1 if
        none. Rows in one aggregate (most) cost one gather; rows in several
        go through their aggregate entries."""
        out = np.full(len(rows), -1, np.int64)
        if not len(supply) or not len(rows):
            return out
        aggs_of = self.ix.aggregates
        ranked = self.preference(supply, rc)
        sharing, ent_pos, ent_agg = self._sharing_entries()
        rank_by_pos = np.full(len(sharing), _BIG, np.int64)
        rank_by_pos[np.searchsorted(sharing, ranked)] = np.arange(len(ranked))
        ent_rank = rank_by_pos[ent_pos]
        live = ent_rank < _BIG
        agg_best = np.full(len(aggs_of.uuids), _BIG, np.int64)  # id 0: none
        np.minimum.at(agg_best, ent_agg[live], ent_rank[live])
        single = aggs_of.single[rows]
        best = agg_best[np.maximum(single, 0)]
        multi = np.flatnonzero(single < 0)
        if len(multi):
            which, aggs = aggs_of.entries_of(rows[multi])
            worst = np.full(len(multi), _BIG, np.int64)
            np.minimum.at(worst, which, agg_best[aggs])
            best[multi] = worst
        found = best < _BIG
        out[found] = ranked[best[found]]
        return out

    # ------------------------------------------------------------ evaluate
    def evaluate(self, request: CandidateRequest) -> Evaluation:
        """Masks of the providers that may supply each class and of the
        anchors still possible (placement-semantics.md section 2):

        * a supplier passes the forbidden traits, every ``member_of`` list,
          the forbidden aggregates, ``in_tree`` and fits the amount;
        * an anchor root passes ``root_required``/``root_forbidden``, is
          in no forbidden aggregate and is the ``in_tree`` tree;
        * sharing suppliers (off with ``in_tree``) serve every anchor with
          which they share an aggregate.
        """
        if not isinstance(request, CandidateRequest):
            raise validation.bad("request", request, "must be a CandidateRequest")
        ix = self.ix
        groups = request.trait_groups
        if len(groups) > 64:
            raise errors.Unsupported("more than 64 required trait groups")
        n = ix.n_rows
        prov, anchor = self._filters(request, n)
        sharing = self.sharing_rows()
        if request.in_tree:
            tree = np.zeros(n, bool)
            in_tree = ix.row_of.get(request.in_tree)
            if in_tree is not None and ix.alive[in_tree]:
                tree[in_tree] = True
            prov, anchor = _narrow(prov, tree), _narrow(anchor, tree)
            sharing = sharing[:0]
        rcs = list(request.resources)
        local, shared = {}, {}
        pre = anchor
        for rc, amount in request.resources.items():
            col = ix.columns.get(rc)
            fit = col.fit_mask(amount, n) if col else np.zeros(n, bool)
            local[rc] = fit if prov is None else fit & prov
            shared[rc] = sharing[local[rc][sharing]] if len(sharing) else sharing
        for rc in rcs:
            if not len(shared[rc]):
                pre = _narrow(pre, local[rc])
        if pre is None:
            pre = np.ones(n, bool)
        return Evaluation(request, n, rcs, local, shared, pre, groups)

    def _filters(self, request: CandidateRequest, n: int
                 ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(supplier mask, anchor mask) of the trait and aggregate filters;
        None where a side is not filtered."""
        traits, aggs = self.ix.traits, self.ix.aggregates
        prov: np.ndarray | None = None
        anchor: np.ndarray | None = None
        if request.forbidden:
            prov = _narrow(prov, ~traits.any_of(request.forbidden, n))
        for agg_list in request.member_of:
            prov = _narrow(prov, aggs.member_mask(agg_list, n))
        if request.forbidden_aggregates:
            ok = ~aggs.member_mask(request.forbidden_aggregates, n)
            prov, anchor = _narrow(prov, ok), _narrow(anchor, ok)
        if request.root_required:
            anchor = _narrow(anchor, traits.all_of(request.root_required, n))
        if request.root_forbidden:
            anchor = _narrow(anchor, ~traits.any_of(request.root_forbidden, n))
        return prov, anchor

    def restrict(self, ev: Evaluation, only: np.ndarray | None,
                 include_sharing_roots: bool) -> None:
        """Narrow ``ev``'s anchors to the rows ``only`` (None: all), without
        the sharing providers unless ``include_sharing_roots``."""
        pre = ev.pre.copy() if only is None else np.zeros_like(ev.pre)
        if only is not None:
            pre[only] = ev.pre[only]
        if not include_sharing_roots and self.ix.sharing_set:
            pre[self.sharing_rows()] = False
        ev.pre = pre

    # --------------------------------------------------------------- solve
    def solve(self, ev: Evaluation) -> Solution:
        """Every anchor root with at least one candidate, and one candidate
        each: (root rows ascending, {rc: supplying row per root}).

        The candidate preferred is the first of: all local, then sharing
        suppliers (grouped by which required-trait groups they meet, the
        best supplier per group by ``preference``), in product order.
        """
        r0 = np.flatnonzero(ev.pre)
        sharing_rcs = [rc for rc in ev.rcs if len(ev.shared[rc])]
        if not sharing_rcs:
            ok = np.ones(len(r0), bool)
            for group in ev.groups:
                ok &= self.ix.traits.any_of_rows(group, r0)
            rows = r0[ok]
            return rows, {rc: rows for rc in ev.rcs}
        if not ev.groups:
            return self._solve_per_class(ev, r0, sharing_rcs)
        return self._solve_with_traits(ev, r0, sharing_rcs)

    def _solve_per_class(self, ev: Evaluation, r0: np.ndarray,
                         sharing_rcs: list[str]) -> Solution:
        """No trait groups: each class independently, local where possible."""
        sources = {rc: r0 for rc in ev.rcs}
        dropped = []
        for rc in sharing_rcs:
            need = np.flatnonzero(~ev.local[rc][r0])
            best = self._best_reachable(ev.shared[rc], rc, r0[need])
            dropped.append(need[best < 0])
            src = r0.copy()
            src[need] = best
            sources[rc] = src
        gone = np.concatenate(dropped)
        if not len(gone):
            return r0, sources
        ok = np.ones(len(r0), bool)
        ok[gone] = False
        return r0[ok], {rc: s[ok] for rc, s in sources.items()}

    def _solve_with_traits(self, ev: Evaluation, r0: np.ndarray,
                           sharing_rcs: list[str]) -> Solution:
        """Trait groups met collectively: try the (local | sharing supplier
        class) combinations in product order, first match per root."""
        traits = self.ix.traits
        supply_masks = {rc: traits.group_masks(ev.groups, ev.shared[rc])
                        for rc in sharing_rcs}
        # a trait group no sharing supplier meets must be met by the root
        reachable = int(np.bitwise_or.reduce(np.concatenate(list(supply_masks.values()))))
        own = np.ones(len(r0), bool)
        for g, group in enumerate(ev.groups):
            if not reachable >> g & 1:
                own &= traits.any_of_rows(group, r0)
        r0 = r0[own]
        # options[rc][0] is "local"; then (trait-group mask, best row per r0)
        options: dict[str, list] = {rc: [None] for rc in ev.rcs}
        for rc in sharing_rcs:
            supply, masks = ev.shared[rc], supply_masks[rc]
            for m in np.unique(masks):
                options[rc].append((int(m), self._best_reachable(
                    supply[masks == m], rc, r0)))
        combos = list(itertools.product(*[range(len(options[rc])) for rc in ev.rcs]))
        if len(combos) > MAX_COMBINATIONS:
            return self._solve_by_enumeration(ev, r0)
        chosen = self._first_combination(ev, r0, options, combos)
        keep = np.flatnonzero(chosen >= 0)
        rows, picked = r0[keep], chosen[keep]
        table = np.array(combos, np.int64)  # combo -> option index per rc
        sources = {}
        for i, rc in enumerate(ev.rcs):
            src = rows.copy()
            option = table[:, i][picked]
            for j in range(1, len(options[rc])):
                sel = np.flatnonzero(option == j)
                src[sel] = options[rc][j][1][keep[sel]]
            sources[rc] = src
        return rows, sources

    def _first_combination(self, ev: Evaluation, r0: np.ndarray,
                           options: dict[str, list],
                           combos: list[tuple[int, ...]]) -> np.ndarray:
        """Per root of ``r0`` the index of the first combination that gives
        it a candidate meeting every trait group, -1 if none."""
        full = (1 << len(ev.groups)) - 1
        gm = self.ix.traits.group_masks(ev.groups, r0)
        chosen = np.full(len(r0), -1, np.int64)
        for ci, combo in enumerate(combos):
            avail = chosen < 0
            const, any_local = 0, False
            for rc, j in zip(ev.rcs, combo):
                if j == 0:
                    any_local = True
                    if len(options[rc]) > 1:
                        avail &= ev.local[rc][r0]
                else:
                    m, best = options[rc][j]
                    const |= m
                    avail &= best >= 0
            if any_local:
                avail &= (gm | np.uint64(const)) == np.uint64(full)
            elif const != full:
                continue
            chosen[avail] = ci
        return chosen

    def _solve_by_enumeration(self, ev: Evaluation, r0: np.ndarray) -> Solution:
        rows, picks = [], []
        enum = Enumerator(self.ix, self, ev)
        for r in r0.tolist():
            first = next(enum.root_candidates(r), None)
            if first is not None:
                rows.append(r)
                picks.append(first)
        arr = np.array(rows, np.int64)
        return arr, {rc: np.array([p[i] for p in picks], np.int64)
                     for i, rc in enumerate(ev.rcs)}


def _narrow(base: np.ndarray | None, mask: np.ndarray) -> np.ndarray:
    return mask if base is None else base & mask


class Enumerator:
    """Candidates of one evaluated query (``Solver.evaluate``)."""

    def __init__(self, index: Rows, solver: Solver, ev: Evaluation):
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
