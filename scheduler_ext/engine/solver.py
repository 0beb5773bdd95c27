"""Which anchor roots fit a query, vectorized (``CapacityIndex``'s half
that reads): the masks of placement-semantics.md section 2 and the choice
of one candidate per root.

``Solver`` is a mixin over ``CapacityIndex``'s storage (``_cols``,
``_traits``, ``_aggs``, ``_sharing``, ``_hi``/``_lo``, ``_n``).
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from scheduler_ext import errors
from scheduler_ext.engine import candidates as cand
from scheduler_ext.engine.request import CandidateRequest
from scheduler_ext.placement import validation

#: Above this many (local/sharing x trait-mask) choice combinations the
#: fast path falls back to exact per-root enumeration.
MAX_COMBINATIONS = 256
_BIG = np.iinfo(np.int64).max


@dataclasses.dataclass
class _Eval:
    """Per-query masks over provider rows ``< n`` (see ``_evaluate``)."""

    request: CandidateRequest
    n: int
    rcs: list[str]
    local: dict[str, np.ndarray]   # rc -> bool[n]: may supply rc itself
    shared: dict[str, np.ndarray]  # rc -> sharing rows that may supply rc
    pre: np.ndarray                # bool[n]: anchors not ruled out yet
    groups: tuple[frozenset[str], ...]


class Solver:
    """Query evaluation over the index's arrays (see module docstring)."""

    # -------------------------------------------------------------- sharing
    def _sharing_rows(self) -> np.ndarray:
        return self._sharing_cache()[0]

    def _sharing_cache(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sorted sharing rows, entry -> index into them, entry -> aggregate)."""
        if self._sh_cache is None:
            rows = np.array(sorted(self._sharing), np.int64)
            pos, agg = [], []
            for i, r in enumerate(rows.tolist()):
                for a in self._aggs.sets[r]:
                    pos.append(i)
                    agg.append(a)
            self._sh_cache = (rows, np.array(pos, np.int64), np.array(agg, np.int64))
        return self._sh_cache

    def _preference(self, rows: np.ndarray, rc: str) -> np.ndarray:
        """``rows`` ordered best first for supplying ``rc``: most free units,
        then uuid."""
        free = self._cols[rc].gather("free", rows)
        return rows[np.lexsort((self._lo[rows], self._hi[rows], -free))]

    def _best_reachable(self, supply: np.ndarray, rc: str,
                        rows: np.ndarray) -> np.ndarray:
        """int64 per entry of ``rows``: the best (``_preference``) row of
        the sharing rows ``supply`` that shares an aggregate with it, -1 if
        none. Rows in one aggregate (most) cost one gather; rows in several
        go through their aggregate entries."""
        out = np.full(len(rows), -1, np.int64)
        if not len(supply) or not len(rows):
            return out
        ranked = self._preference(supply, rc)
        sharing, ent_pos, ent_agg = self._sharing_cache()
        rank_by_pos = np.full(len(sharing), _BIG, np.int64)
        rank_by_pos[np.searchsorted(sharing, ranked)] = np.arange(len(ranked))
        ent_rank = rank_by_pos[ent_pos]
        live = ent_rank < _BIG
        agg_best = np.full(len(self._aggs.uuids), _BIG, np.int64)  # id 0: none
        np.minimum.at(agg_best, ent_agg[live], ent_rank[live])
        single = self._aggs.single[rows]
        best = agg_best[np.maximum(single, 0)]
        multi = np.flatnonzero(single < 0)
        if len(multi):
            which, aggs = self._aggs.entries_of(rows[multi])
            worst = np.full(len(multi), _BIG, np.int64)
            np.minimum.at(worst, which, agg_best[aggs])
            best[multi] = worst
        found = best < _BIG
        out[found] = ranked[best[found]]
        return out

    # ------------------------------------------------------------- queries
    def _evaluate(self, request: CandidateRequest) -> _Eval:
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
        if self._tree:
            row, (parent, _) = next(iter(self._tree.items()))
            raise errors.Unsupported(
                f"the fleet holds nested providers ({self._uuids[row]} is a "
                f"child of {parent}); ask placement")
        groups = request.trait_groups
        if len(groups) > 64:
            raise errors.Unsupported("more than 64 required trait groups")
        n = self._n
        prov: np.ndarray | None = None  # None: no provider filter
        anchor: np.ndarray | None = None

        def narrow(base: np.ndarray | None, mask: np.ndarray) -> np.ndarray:
            return mask if base is None else base & mask

        if request.forbidden:
            prov = narrow(prov, ~self._traits.any_of(request.forbidden, n))
        for aggs in request.member_of:
            prov = narrow(prov, self._aggs.member_mask(aggs, n))
        if request.forbidden_aggregates:
            ok = ~self._aggs.member_mask(request.forbidden_aggregates, n)
            prov, anchor = narrow(prov, ok), narrow(anchor, ok)
        if request.root_required:
            anchor = narrow(anchor, self._traits.all_of(request.root_required, n))
        if request.root_forbidden:
            anchor = narrow(anchor, ~self._traits.any_of(request.root_forbidden, n))
        sharing = self._sharing_rows()
        if request.in_tree:
            tree = np.zeros(n, bool)
            row = self._row_of.get(request.in_tree)
            if row is not None and self._alive[row]:
                tree[row] = True
            prov, anchor = narrow(prov, tree), narrow(anchor, tree)
            sharing = sharing[:0]
        rcs = list(request.resources)
        local, shared = {}, {}
        pre = anchor
        for rc, amount in request.resources.items():
            col = self._cols.get(rc)
            fit = col.fit_mask(amount, n) if col else np.zeros(n, bool)
            local[rc] = fit if prov is None else fit & prov
            shared[rc] = sharing[local[rc][sharing]] if len(sharing) else sharing
        for rc in rcs:
            if not len(shared[rc]):
                pre = narrow(pre, local[rc])
        if pre is None:
            pre = np.ones(n, bool)
        return _Eval(request, n, rcs, local, shared, pre, groups)

    def _solve(self, ev: _Eval) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Every anchor root with at least one candidate, and one candidate
        each: (root rows ascending, {rc: supplying row per root}).

        The candidate preferred is the first of: all local, then sharing
        suppliers (grouped by which required-trait groups they meet, the
        best supplier per group by ``_preference``), in product order.
        """
        rcs, k = ev.rcs, len(ev.groups)
        r0 = np.flatnonzero(ev.pre)
        sharing_rcs = [rc for rc in rcs if len(ev.shared[rc])]
        if not sharing_rcs:
            ok = np.ones(len(r0), bool)
            for group in ev.groups:
                ok &= self._traits.any_of_rows(group, r0)
            rows = r0[ok] if k else r0
            return rows, {rc: rows for rc in rcs}
        local_r0 = {rc: ev.local[rc][r0] for rc in sharing_rcs}
        if not k:
            # no trait groups: each class independently, local where possible
            sources = {rc: r0 for rc in rcs}
            dropped = []
            for rc in sharing_rcs:
                need = np.flatnonzero(~local_r0[rc])
                best = self._best_reachable(ev.shared[rc], rc, r0[need])
                dropped.append(need[best < 0])
                src = r0.copy()
                src[need] = best
                sources[rc] = src
            dropped = np.concatenate(dropped)
            if not len(dropped):
                return r0, sources
            ok = np.ones(len(r0), bool)
            ok[dropped] = False
            return r0[ok], {rc: s[ok] for rc, s in sources.items()}
        # a trait group no sharing supplier meets must be met by the root
        supply_masks = {rc: self._traits.group_masks(ev.groups, ev.shared[rc])
                        for rc in sharing_rcs}
        reachable = int(np.bitwise_or.reduce(np.concatenate(list(supply_masks.values()))))
        own = np.ones(len(r0), bool)
        for g, group in enumerate(ev.groups):
            if not reachable >> g & 1:
                own &= self._traits.any_of_rows(group, r0)
        if not own.all():
            r0 = r0[own]
            local_r0 = {rc: m[own] for rc, m in local_r0.items()}
        # options[rc][0] is "local"; then (trait-group mask, best row per r0)
        options: dict[str, list[tuple[int, np.ndarray] | None]] = {rc: [None] for rc in rcs}
        for rc in sharing_rcs:
            supply = ev.shared[rc]
            masks = supply_masks[rc]
            for m in np.unique(masks):
                best = self._best_reachable(supply[masks == m], rc, r0)
                options[rc].append((int(m), best))
        combos = list(itertools.product(*[range(len(options[rc])) for rc in rcs]))
        if len(combos) > MAX_COMBINATIONS:
            return self._solve_by_enumeration(ev, r0)
        full = (1 << k) - 1
        gm = self._traits.group_masks(ev.groups, r0) if k else None
        chosen = np.full(len(r0), -1, np.int64)
        for ci, combo in enumerate(combos):
            avail = chosen < 0
            const, any_local = 0, False
            for rc, j in zip(rcs, combo):
                if j == 0:
                    any_local = True
                    if rc in local_r0:
                        avail &= local_r0[rc]
                else:
                    m, best = options[rc][j]
                    const |= m
                    avail &= best >= 0
            if k:
                if any_local:
                    avail &= (gm | np.uint64(const)) == np.uint64(full)
                elif const != full:
                    continue
            chosen[avail] = ci
        keep = np.flatnonzero(chosen >= 0)
        rows, picked = r0[keep], chosen[keep]
        table = np.array(combos, np.int64)  # combo -> option index per rc
        sources = {}
        for i, rc in enumerate(rcs):
            if len(options[rc]) == 1:
                sources[rc] = rows
                continue
            src = rows.copy()
            option = table[:, i][picked]
            for j in range(1, len(options[rc])):
                sel = np.flatnonzero(option == j)
                src[sel] = options[rc][j][1][keep[sel]]
            sources[rc] = src
        return rows, sources

    def _solve_by_enumeration(self, ev: _Eval, r0: np.ndarray
                              ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        rows, picks = [], []
        enum = cand.Enumerator(self, ev)
        for r in r0.tolist():
            first = next(enum.root_candidates(r), None)
            if first is not None:
                rows.append(r)
                picks.append(first)
        arr = np.array(rows, np.int64)
        return arr, {rc: np.array([p[i] for p in picks], np.int64)
                     for i, rc in enumerate(ev.rcs)}

