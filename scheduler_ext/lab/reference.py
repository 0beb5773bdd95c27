"""Placement's candidate rules read provider by provider, in plain Python.

Two uses: the baseline ``scheduler-ext bench`` compares the engine with (a
reasonable per-provider loop, not a straw man: sharing providers are found
through an aggregate dictionary), and an independent oracle the unit tests
hold ``CapacityIndex`` to. It follows placement 16.0.0's own steps, not the
engine's: per request group a list of (anchor root, allocation) pairs (the
unnumbered group through its per-class provider lists of each tree, a
granular group one provider at a time), then per anchor the product of the
groups, filtered by ``group_policy``, ``same_subtree`` and the capacity of
the merged amounts (``docs/placement-nested-semantics.rst``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Iterable, Mapping

from scheduler_ext.placement.model import SHARING_TRAIT as SHARING
from scheduler_ext.placement.model import Allocations, FleetSnapshot
from scheduler_ext.placement.query import CandidateRequest, RequestGroup

#: one group's answer at one anchor: ((provider, class, amount), ...) and
#: the providers it maps its suffix to
Part = tuple[tuple[tuple[str, str, int], ...], frozenset[str]]


@dataclasses.dataclass
class RefProvider:
    """One provider. ``inventories[rc] = (total, reserved, min_unit,
    max_unit, step_size, allocation_ratio)``; ``used[rc]`` in units;
    ``parent`` None for a root; ``root`` the uuid of its tree's root."""

    uuid: str
    inventories: dict[str, tuple[int, int, int, int, int, float]]
    used: dict[str, int]
    traits: frozenset[str]
    aggregates: frozenset[str]
    parent: str | None = None
    root: str = ""

    def __post_init__(self) -> None:
        self.root = self.root or self.uuid


def from_snapshot(snapshot: FleetSnapshot) -> list[RefProvider]:
    return [RefProvider(
        r.provider.uuid,
        {rc: (i.total, i.reserved, i.min_unit, i.max_unit, i.step_size,
              i.allocation_ratio) for rc, i in r.inventories.items()},
        {rc: int(r.usages.get(rc, 0)) for rc in r.inventories},
        frozenset(r.traits), frozenset(r.aggregates),
        r.provider.parent_provider_uuid, r.provider.root_provider_uuid)
        for r in snapshot.providers]


def from_columnar(fleet) -> list[RefProvider]:
    """``RefProvider`` per row of a ``ColumnarFleet`` (plain Python objects:
    about a kilobyte each)."""
    invs: list[dict] = [{} for _ in range(len(fleet))]
    used: list[dict] = [{} for _ in range(len(fleet))]
    for rc, ic in fleet.inventories.items():
        cols = zip(ic.rows.tolist(), ic.total.tolist(), ic.reserved.tolist(),
                   ic.min_unit.tolist(), ic.max_unit.tolist(), ic.step_size.tolist(),
                   ic.allocation_ratio.tolist(), ic.used.tolist())
        for row, total, reserved, mn, mx, step, ratio, u in cols:
            invs[row][rc] = (total, reserved, mn, mx, step, ratio)
            used[row][rc] = u
    tsets = [frozenset(t) for t in fleet.trait_sets]
    asets = [frozenset(a) for a in fleet.aggregate_sets]
    parents = fleet.parents or [None] * len(fleet)
    roots = fleet.roots or [""] * len(fleet)
    return [RefProvider(u, invs[i], used[i], tsets[t], asets[a], parents[i], roots[i])
            for i, (u, t, a) in enumerate(zip(fleet.uuids, fleet.trait_set_of.tolist(),
                                              fleet.aggregate_set_of.tolist()))]


class Reference:
    """Answers over a list of ``RefProvider``."""

    def __init__(self, providers: Iterable[RefProvider]):
        self.providers = list(providers)
        self.by_uuid = {p.uuid: p for p in self.providers}
        self.trees: dict[str, list[RefProvider]] = {}
        for p in self.providers:
            self.trees.setdefault(p.root, []).append(p)
        self.sharing = [p for p in self.providers if SHARING in p.traits]
        self.by_agg: dict[str, set[str]] = {}
        for p in self.providers:
            for a in p.aggregates:
                self.by_agg.setdefault(a, set()).add(p.root)
        self.freed: dict[tuple[str, str], int] = {}

    # ------------------------------------------------------------- rules
    def capacity(self, p: RefProvider, rc: str) -> int:
        total, reserved, *_, ratio = p.inventories[rc]
        return math.floor((total - reserved) * ratio)

    def used(self, p: RefProvider, rc: str) -> int:
        return p.used.get(rc, 0) - self.freed.get((p.uuid, rc), 0)

    def fits(self, p: RefProvider, rc: str, amount: int) -> bool:
        inv = p.inventories.get(rc)
        if inv is None:
            return False
        _, _, min_unit, max_unit, step, _ = inv
        return (self.used(p, rc) + amount <= self.capacity(p, rc)
                and min_unit <= amount <= max_unit and amount % step == 0)

    def anchors(self, s: RefProvider) -> set[str]:
        """Roots of the trees with a member in one of ``s``'s aggregates."""
        return set().union(*(self.by_agg.get(a, set()) for a in s.aggregates))

    def in_aggs(self, lists: tuple[frozenset[str], ...]) -> set[str]:
        """Providers in one aggregate of every list (the provider itself)."""
        return {p.uuid for p in self.providers
                if all(p.aggregates & aggs for aggs in lists)}

    def tree_root(self, uuid: str | None) -> str | None:
        p = self.by_uuid.get(uuid or "")
        return p.root if p else None

    # ------------------------------------------------------- one group each
    def unnumbered(self, g: RequestGroup, anchor_ok: set[str]) -> dict[str, list[Part]]:
        """Anchor -> the unnumbered group's allocations there."""
        agg_ok = self.in_aggs(g.member_of) if g.member_of else None
        bad = {p.uuid for p in self.providers if p.aggregates & g.forbidden_aggregates}
        tree = self.tree_root(g.in_tree) if g.in_tree else None
        per_rc: list[set[tuple[str, str]]] = []
        for rc, amount in g.resources.items():
            pairs = {(p.uuid, p.root) for p in self.providers if self.fits(p, rc, amount)
                     and (g.in_tree is None or p.root == tree)}
            if g.in_tree is None:
                for s in self.sharing:
                    if self.fits(s, rc, amount) and (agg_ok is None or s.uuid in agg_ok):
                        pairs |= {(s.uuid, a) for a in self.anchors(s)}
            pairs = {(p, a) for p, a in pairs if a in anchor_ok
                     and (agg_ok is None or p in agg_ok or a in agg_ok)
                     and p not in bad and a not in bad}
            per_rc.append(pairs)
        out: dict[str, list[Part]] = {}
        by_anchor: list[dict[str, list[str]]] = []
        for pairs_rc in per_rc:
            d: dict[str, list[str]] = {}
            for p, a in pairs_rc:
                d.setdefault(a, []).append(p)
            by_anchor.append(d)
        common = set.intersection(*(set(d) for d in by_anchor))
        groups = g.trait_groups
        for a in sorted(common):
            lists = [sorted(d[a]) for d in by_anchor]
            for combo in itertools.product(*lists):
                provs = [self.by_uuid[u] for u in combo]
                if any(p.traits & g.forbidden for p in provs):
                    continue
                have = frozenset().union(*(p.traits for p in provs))
                if all(have & names for names in groups):
                    out.setdefault(a, []).append((tuple(
                        (u, rc, n) for u, (rc, n) in zip(combo, g.resources.items())),
                        frozenset(combo)))
        return out

    def granular(self, g: RequestGroup, anchor_ok: set[str]) -> dict[str, list[Part]]:
        """Anchor -> the granular group's allocations there."""
        tree = self.tree_root(g.in_tree) if g.in_tree else None
        if g.in_tree is not None and tree is None:
            return {}
        ok = []
        for p in self.providers:
            if not all(p.traits & names for names in g.trait_groups) \
                    or p.traits & g.forbidden \
                    or not all(p.aggregates & aggs for aggs in g.member_of) \
                    or p.aggregates & g.forbidden_aggregates:
                continue
            if g.resources and (
                    (tree is not None and p.root != tree)
                    or not all(self.fits(p, rc, n) for rc, n in g.resources.items())):
                continue
            if not g.resources and not g.trait_groups and not g.member_of:
                continue  # placement 16.0.0 finds nothing for such a group
            ok.append(p)
        out: dict[str, list[Part]] = {}
        for p in ok:
            part = (tuple((p.uuid, rc, n) for rc, n in g.resources.items()),
                    frozenset([p.uuid]))
            anchors = {p.root} | (self.anchors(p) if SHARING in p.traits else set())
            for a in sorted(anchors & anchor_ok):
                out.setdefault(a, []).append(part)
        return out

    # -------------------------------------------------------------- merge
    def ancestors(self, uuid: str) -> set[str]:
        out = {uuid}
        while self.by_uuid[uuid].parent:
            uuid = self.by_uuid[uuid].parent or ""
            out.add(uuid)
        return out

    def merged(self, req: CandidateRequest, suffixes: list[str],
               parts: tuple[Part, ...]) -> tuple[frozenset, frozenset] | None:
        """The merged candidate of one part per group, or None if placement
        drops it."""
        mapped = dict(zip(suffixes, (m for _, m in parts)))
        granular = [next(iter(mapped[s])) for s in suffixes if s]
        if req.isolate and len(set(granular)) != len(granular):
            return None
        for names in req.same_subtree:
            rps = set().union(*(mapped[s] for s in names))
            common = set.intersection(*(self.ancestors(u) for u in rps))
            if len(rps) > 1 and not common & rps:
                return None
        totals: dict[tuple[str, str], int] = {}
        for allocs, _ in parts:
            for u, rc, n in allocs:
                totals[(u, rc)] = totals.get((u, rc), 0) + n
        for (u, rc), n in totals.items():
            p = self.by_uuid[u]
            if self.used(p, rc) + n > int((p.inventories[rc][0] - p.inventories[rc][1])
                                          * p.inventories[rc][5]) \
                    or n > p.inventories[rc][3]:
                return None
        return frozenset(totals.items()), frozenset(
            (s, m) for s, m in mapped.items())

    def by_anchor(self, req: CandidateRequest, released=None) -> dict[str, list]:
        """Anchor root -> its merged candidates, in product order."""
        self.freed = {(rp, rc): n for rp, res in (released or {}).items()
                      for rc, n in res.items()}
        roots = [p for p in self.providers if p.parent is None]
        anchor_ok = {p.uuid for p in roots if req.root_required <= p.traits
                     and not p.traits & req.root_forbidden}
        groups = req.groups
        per_group = [self.granular(g, anchor_ok) if g.granular
                     else self.unnumbered(g, anchor_ok) for g in groups]
        suffixes = [g.suffix for g in groups]
        out: dict[str, list] = {}
        common = set.intersection(*(set(d) for d in per_group))
        for a in sorted(common):
            for parts in itertools.product(*(d[a] for d in per_group)):
                cand = self.merged(req, suffixes, parts)
                if cand is not None:
                    out.setdefault(a, []).append(cand)
        return out

    # ------------------------------------------------------------ answers
    def candidates(self, req: CandidateRequest,
                   released: Allocations | None = None) -> dict:
        """Unlimited ``GET /allocation_candidates`` answer (order: anchors
        by uuid)."""
        seen: dict = {}
        for cands in self.by_anchor(req, released).values():
            for cand in cands:
                seen.setdefault(cand)
        areqs = []
        trees: set[str] = set()
        for totals, mapped in seen:
            allocs: dict[str, dict] = {}
            for (u, rc), n in sorted(totals):
                allocs.setdefault(u, {"resources": {}})["resources"][rc] = n
                trees.add(self.by_uuid[u].root)
            areqs.append({"allocations": allocs,
                          "mappings": {s: sorted(m) for s, m in sorted(mapped)}})
        summaries = {}
        for p in sorted((p for t in trees for p in self.trees[t]), key=lambda p: p.uuid):
            summaries[p.uuid] = {
                "resources": {rc: {"capacity": int((inv[0] - inv[1]) * inv[5]),
                                   "used": self.used(p, rc)}
                              for rc, inv in p.inventories.items()},
                "traits": sorted(p.traits), "parent_provider_uuid": p.parent,
                "root_provider_uuid": p.root}
        return {"allocation_requests": areqs, "provider_summaries": summaries}

    def fitting_roots(self, req: CandidateRequest,
                      released: Allocations | None = None,
                      include_sharing_roots: bool = False) -> list[str]:
        """Roots with at least one candidate (the scheduler's question)."""
        return [a for a in self.by_anchor(req, released)
                if include_sharing_roots or SHARING not in self.by_uuid[a].traits]

    def claimed(self, root: str, cands: list) -> tuple:
        """The candidate a scheduler claims at ``root`` (as the engine
        picks it): each class from the root's own tree where it can supply
        it, else from a sharing provider; among those, the most free units,
        then the smallest uuid (class by class). A host with its own disk is
        so weighed by that disk, the compute node's free disk that nova's
        DiskWeigher reads; placement's first candidate (by uuid) would often
        take a shared pool instead."""
        def rank(cand: tuple) -> tuple:
            key = []
            for (u, rc), _ in sorted(cand[0], key=lambda t: t[0][1]):
                p = self.by_uuid[u]
                key.append((p.root != root, self.used(p, rc) - self.capacity(p, rc), u))
            return tuple(key)
        return min(cands, key=rank)

    def select(self, req: CandidateRequest, multipliers: Mapping[str, float],
               k: int = 1) -> list[tuple[str, float]]:
        """Fitting roots weighed nova's way: per class the free units at the
        provider supplying it in the root's ``claimed`` candidate (at the
        root for a class the request does not name, 0 if it has none),
        normalized over the roots; best ``k`` by weight then uuid."""
        fit = [(a, self.claimed(a, cands)) for a, cands in self.by_anchor(req).items()
               if SHARING not in self.by_uuid[a].traits]
        weights = [0.0] * len(fit)
        for rc, mult in multipliers.items():
            if not mult:
                continue
            values = []
            for a, (totals, _) in fit:
                supplier = next((u for (u, c), _ in totals if c == rc), a)
                p = self.by_uuid[supplier]
                values.append(self.capacity(p, rc) - self.used(p, rc)
                              if rc in p.inventories else 0)
            if values:
                lo, hi = min(values), max(values)
                for i, v in enumerate(values):
                    weights[i] += mult * (0.0 if hi == lo else (v - lo) / (hi - lo))
        ranked = sorted(range(len(fit)), key=lambda i: (-weights[i], fit[i][0]))
        return [(fit[i][0], weights[i]) for i in ranked[:k]]
