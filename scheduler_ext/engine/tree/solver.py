"""The fast path on provider trees and granular groups: which roots have
at least one allocation candidate, and one candidate each, vectorized.

Per slot (see ``supply``) and per root, the preferred supplier is the best
member of the root's tree (most free units, then uuid) or else the best
sharing provider serving the tree. The unnumbered group's required traits,
met collectively, are solved by trying (member or sharing supplier x which
trait groups it meets) combinations in order, first fit per root. The
picks are then checked together as placement checks a merged candidate:
amounts of one class drawn from one provider by several groups must fit
(capacity and ``max_unit``), ``group_policy=isolate`` needs distinct
providers for the granular groups, and each ``same_subtree`` set needs one
provider of the set that is an ancestor (or itself) of all the others.

A root whose preferred picks fail those checks but that has other
suppliers is settled exactly by ``TreeEnumerator`` (one root at a time,
in Python): the answer is exact, only the rare root costs more.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np

from scheduler_ext.engine.fleet import trees as treelib
from scheduler_ext.engine.fleet.rows import Rows
from scheduler_ext.engine.fleet.trees import TreeAggregates, Trees
from scheduler_ext.engine.tree.branchless import choose
from scheduler_ext.engine.tree.supply import Supply

#: Above this many unnumbered-group option combinations (required traits),
#: roots are settled one by one by exact enumeration.
MAX_COMBINATIONS = 256


@dataclasses.dataclass
class Picks:
    """``pos``: compact root positions with a candidate, ascending;
    ``rows[s][i]``: the row filling slot ``s`` for root ``pos[i]``."""

    pos: np.ndarray
    rows: list[np.ndarray]


class TreeSolver:
    """Vectorized picks over one index (the caller holds its lock)."""

    def __init__(self, index: Rows, trees: Trees, tagg: TreeAggregates):
        self.ix = index
        self.trees = trees
        self.tagg = tagg

    # ------------------------------------------------------------ primitives
    def key(self, rows: np.ndarray, rc: str | None) -> np.ndarray:
        col = self.ix.columns.get(rc) if rc else None
        free = col.gather("free", rows) if col is not None else np.zeros(len(rows), np.int64)
        return treelib.preference_key(self.trees, rows, free)

    def ranked_sharing(self, rows: np.ndarray, rc: str | None) -> np.ndarray:
        """Sharing ``rows`` best first: most free units of ``rc``, then uuid."""
        ix = self.ix
        col = ix.columns.get(rc) if rc else None
        free = col.gather("free", rows) if col is not None else np.zeros(len(rows), np.int64)
        return rows[np.lexsort((ix.key_lo[rows], ix.key_hi[rows], -free))]

    def best_reachable(self, supply: np.ndarray, rc: str | None,
                       where: np.ndarray | None = None) -> np.ndarray:
        """int64 per compact root: the best sharing row of ``supply`` that
        shares an aggregate with the root's tree, -1 if none. ``where``
        (bool per compact root) marks the roots the caller will read; when
        it marks none, nothing is computed."""
        if not len(supply) or (where is not None and not where.any()):
            return np.full(self.trees.n_roots, -1, np.int64)
        ranked = self.ranked_sharing(supply, rc)
        which, aggs = self.ix.aggregates.entries_of(ranked)
        # per aggregate the rank of its best supplier (len(ranked): none);
        # every per-root step below gathers from these small tables
        agg_best = np.full(len(self.ix.aggregates.uuids), len(ranked), np.int64)
        np.minimum.at(agg_best, aggs.astype(np.int64), which)
        agg_best[0] = len(ranked)
        tagg = self.tagg
        best = agg_best[tagg.single_or_none]
        multi_pos, multi_agg = tagg.several
        if len(multi_pos):
            np.minimum.at(best, multi_pos, agg_best[multi_agg])
        return np.append(ranked, -1)[best]

    # ------------------------------------------------------------------ solve
    def slot_key(self, slot) -> np.ndarray:
        free = slot.free if slot.free is not None else np.zeros(len(slot.rows), np.int64)
        return treelib.preference_key(self.trees, slot.rows, free)

    def availability(self, sup: Supply, pre: np.ndarray
                     ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]],
                                list[np.ndarray | None]]:
        """(roots with at least one supplier for every slot, and per slot:
        the best member per root with where there is one (``Slot.member``),
        the best sharing provider per root or None when no sharing provider
        may fill the slot)."""
        pre = pre & sup.anchor
        best: list[tuple[np.ndarray, np.ndarray]] = []
        shared: list[np.ndarray | None] = []
        every = bool(sup.trait_groups)   # trait combinations want all options
        for slot in sup.slots:
            member, have = slot.member(self.trees, functools.partial(self.slot_key, slot))
            best.append((member, have))
            if not len(slot.shared):
                shared.append(None)
                pre &= have
                continue
            lacking = None if every else pre & ~have
            reach = self.best_reachable(slot.shared, slot.score_rc, lacking)
            shared.append(reach)
            pre &= have | (reach >= 0)
        return pre, best, shared

    def possible(self, sup: Supply) -> np.ndarray:
        """Bool per compact root: every slot has a supplier there (the
        anchors exact enumeration has to visit)."""
        return self.availability(sup, np.ones(self.trees.n_roots, bool))[0]

    def solve(self, sup: Supply, pre: np.ndarray, enumerator) -> Picks:
        """Every root (compact position, where ``pre`` allows it) with a
        candidate, and one candidate each. ``enumerator`` settles roots
        exactly (``TreeEnumerator.first``)."""
        pre, best, shared = self.availability(sup, pre)
        pos = np.flatnonzero(pre)
        picks = []
        for (member, have), sharing in zip(best, shared):
            p = member[pos]
            if sharing is not None:
                p = choose(have[pos], p, sharing[pos])
            picks.append(p)
        if len(sup.trait_groups) > 64:   # beyond one mask word: exactly
            return self._enumerate(pos, enumerator, len(sup.slots))
        if sup.trait_groups and sup.unnumbered_slots():
            chosen = self._combinations(sup, pos)
            if chosen is None:
                return self._enumerate(pos, enumerator, len(sup.slots))
            keep = np.flatnonzero(chosen[0])
            pos = pos[keep]
            picks = [p[keep] for p in picks]
            for s, chosen_rows in chosen[1].items():
                picks[s] = chosen_rows[keep]
        ok = self.verify(sup, picks)
        if ok.all():
            return Picks(pos, picks)
        failed = np.flatnonzero(~ok)
        where = np.zeros(self.trees.n_roots, bool)
        where[pos[failed]] = True
        alt = np.zeros(len(failed), bool)
        for slot in sup.slots:
            count = treelib.count_per_root(self.trees, slot.rows)[pos[failed]]
            reach = self.best_reachable(slot.shared, slot.score_rc, where)[pos[failed]]
            alt |= count + 2 * (reach >= 0) >= 2
        for i in failed[alt].tolist():
            first = enumerator.first(int(pos[i]))
            if first is not None:
                ok[i] = True
                for s, picked in enumerate(first):
                    picks[s][i] = picked
        return Picks(pos[ok], [p[ok] for p in picks])

    def _enumerate(self, pos: np.ndarray, enumerator, n_slots: int) -> Picks:
        found, rows = [], []
        for j in pos.tolist():
            first = enumerator.first(j)
            if first is not None:
                found.append(j)
                rows.append(first)
        table = np.array(rows, np.int64).reshape(len(rows), n_slots)
        return Picks(np.array(found, np.int64), [table[:, s] for s in range(n_slots)])

    # ------------------------------------------------------ unnumbered traits
    def _options(self, sup: Supply, s: int, pos: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(trait-group mask, best row per root of ``pos``) per option of
        unnumbered slot ``s``: members by mask, then sharing by mask."""
        slot, traits, groups = sup.slots[s], self.ix.traits, sup.trait_groups
        out = []
        rows = slot.rows
        gm = traits.group_masks(groups, rows)
        key = self.slot_key(slot)
        for m in sorted(set(gm.tolist()), reverse=True):
            sel = gm == m
            out.append((int(m), treelib.best_per_root(self.trees, rows[sel], key[sel])[pos]))
        sgm = traits.group_masks(groups, slot.shared)
        for m in sorted(set(sgm.tolist()), reverse=True):
            out.append((int(m), self.best_reachable(slot.shared[sgm == m],
                                                    slot.score_rc)[pos]))
        return out

    def _combinations(self, sup: Supply, pos: np.ndarray
                      ) -> tuple[np.ndarray, dict[int, np.ndarray]] | None:
        """(found per root of ``pos``, {unnumbered slot: row per root}) from
        the first option combination meeting every trait group; None when
        there are too many combinations."""
        u = sup.unnumbered_slots()
        options = [self._options(sup, s, pos) for s in u]
        combos = list(itertools.product(*[range(len(o)) for o in options]))
        if len(combos) > MAX_COMBINATIONS:
            return None
        full = (1 << len(sup.trait_groups)) - 1
        chosen = np.full(len(pos), -1, np.int64)
        for ci, combo in enumerate(combos):
            const = 0
            avail = chosen < 0
            for o, j in zip(options, combo):
                const |= o[j][0]
                avail &= o[j][1] >= 0
            if const == full:
                chosen[avail] = ci
        found = chosen >= 0
        rows = {s: np.full(len(pos), -1, np.int64) for s in u}
        table = np.array(combos, np.int64).reshape(len(combos), len(u))
        for k, s in enumerate(u):
            option = table[np.maximum(chosen, 0), k]
            for j, (_, best) in enumerate(options[k]):
                sel = found & (option == j)
                rows[s][sel] = best[sel]
        return found, rows

    # ----------------------------------------------------------------- verify
    def verify(self, sup: Supply, picks: list[np.ndarray]) -> np.ndarray:
        """Bool per root: the picks pass placement's merged-candidate checks
        (shared capacity, isolate, same_subtree)."""
        size = len(picks[0]) if picks else 0
        ok = np.ones(size, bool)
        if not size:
            return ok
        by_rc: dict[str, list[tuple[int, int]]] = {}
        for s, slot in enumerate(sup.slots):
            for rc, amount in slot.amounts.items():
                by_rc.setdefault(rc, []).append((s, amount))
        for rc, entries in by_rc.items():
            if len(entries) > 1:
                ok &= self._merged_fit(rc, entries, picks)
        granular = [s for s, slot in enumerate(sup.slots) if slot.suffix]
        if sup.request.isolate:
            for a, b in itertools.combinations(granular, 2):
                ok &= picks[a] != picks[b]
        index_of = {sup.slots[s].suffix: s for s in granular}
        for names in sup.request.same_subtree:
            ok &= self._same_subtree([picks[index_of[x]] for x in sorted(names)])
        return ok

    def _merged_fit(self, rc: str, entries: list[tuple[int, int]],
                    picks: list[np.ndarray]) -> np.ndarray:
        col = self.ix.columns[rc]
        ok = np.ones(len(picks[0]), bool)
        for s, _ in entries:
            total = np.zeros(len(ok), np.int64)
            for t, amount in entries:
                total += amount * (picks[t] == picks[s])
            ok &= (col.gather("free", picks[s]) >= total) & (
                col.gather("max_unit", picks[s]) >= total)
        return ok

    def _same_subtree(self, rows: list[np.ndarray]) -> np.ndarray:
        ok = np.zeros(len(rows[0]), bool)
        for top in rows:
            under = np.ones(len(ok), bool)
            for other in rows:
                under &= self.trees.is_ancestor_or_self(top, other)
            ok |= under
        return ok
