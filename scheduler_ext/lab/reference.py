"""Placement's candidate rules read provider by provider, in plain Python.

Two uses: the baseline ``scheduler-ext bench`` compares the engine with (a
reasonable per-provider loop, not a straw man: sharing providers are found
through an aggregate dictionary), and an independent oracle the unit tests
hold ``CapacityIndex`` to. Flat fleets, one unsuffixed group, as the engine.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Iterable, Iterator, Mapping

from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.placement.model import FleetSnapshot

from scheduler_ext.placement.model import SHARING_TRAIT as SHARING  # noqa: E402


@dataclasses.dataclass
class RefProvider:
    """One provider. ``inventories[rc] = (total, reserved, min_unit,
    max_unit, step_size, allocation_ratio)``; ``used[rc]`` in units."""

    uuid: str
    inventories: dict[str, tuple[int, int, int, int, int, float]]
    used: dict[str, int]
    traits: frozenset[str]
    aggregates: frozenset[str]


def from_snapshot(snapshot: FleetSnapshot) -> list[RefProvider]:
    return [RefProvider(
        r.provider.uuid,
        {rc: (i.total, i.reserved, i.min_unit, i.max_unit, i.step_size,
              i.allocation_ratio) for rc, i in r.inventories.items()},
        {rc: int(r.usages.get(rc, 0)) for rc in r.inventories},
        frozenset(r.traits), frozenset(r.aggregates)) for r in snapshot.providers]


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
    return [RefProvider(u, invs[i], used[i], tsets[t], asets[a]) for i, (u, t, a) in
            enumerate(zip(fleet.uuids, fleet.trait_set_of.tolist(),
                          fleet.aggregate_set_of.tolist()))]


class Reference:
    """Answers over a list of ``RefProvider`` (all roots)."""

    def __init__(self, providers: Iterable[RefProvider]):
        self.providers = list(providers)
        self.by_uuid = {p.uuid: p for p in self.providers}
        self.sharing = [p for p in self.providers if SHARING in p.traits]
        self.sharing_by_agg: dict[str, list[RefProvider]] = {}
        for s in self.sharing:
            for a in s.aggregates:
                self.sharing_by_agg.setdefault(a, []).append(s)

    # ------------------------------------------------------------- rules
    @staticmethod
    def fits(p: RefProvider, rc: str, amount: int, freed: int = 0) -> bool:
        inv = p.inventories.get(rc)
        if inv is None:
            return False
        total, reserved, min_unit, max_unit, step, ratio = inv
        capacity = math.floor((total - reserved) * ratio)
        used = p.used.get(rc, 0) - freed
        return (used + amount <= capacity and min_unit <= amount <= max_unit
                and amount % step == 0)

    @staticmethod
    def supplier_ok(p: RefProvider, req: CandidateRequest) -> bool:
        if p.traits & req.forbidden:
            return False
        if any(not (p.aggregates & aggs) for aggs in req.member_of):
            return False
        if p.aggregates & req.forbidden_aggregates:
            return False
        return req.in_tree is None or p.uuid == req.in_tree

    @staticmethod
    def anchor_ok(p: RefProvider, req: CandidateRequest) -> bool:
        if not req.root_required <= p.traits or p.traits & req.root_forbidden:
            return False
        if p.aggregates & req.forbidden_aggregates:
            return False
        return req.in_tree is None or p.uuid == req.in_tree

    def _suppliers(self, root: RefProvider, req: CandidateRequest,
                   freed: Mapping[tuple[str, str], int]) -> list[list[RefProvider]] | None:
        out = []
        for rc, amount in req.resources.items():
            opts = []
            if self.supplier_ok(root, req) and self.fits(
                    root, rc, amount, freed.get((root.uuid, rc), 0)):
                opts.append(root)
            if req.in_tree is None:
                seen = {root.uuid}
                for a in sorted(root.aggregates):
                    for s in self.sharing_by_agg.get(a, ()):
                        if s.uuid in seen:
                            continue
                        seen.add(s.uuid)
                        if self.supplier_ok(s, req) and self.fits(
                                s, rc, amount, freed.get((s.uuid, rc), 0)):
                            opts.append(s)
            if not opts:
                return None
            out.append(opts)
        return out

    def root_candidates(self, root: RefProvider, req: CandidateRequest,
                        freed: Mapping[tuple[str, str], int] | None = None
                        ) -> Iterator[tuple[RefProvider, ...]]:
        """One supplier per requested class, in ``req.resources`` order."""
        if not self.anchor_ok(root, req):
            return
        opts = self._suppliers(root, req, freed or {})
        if opts is None:
            return
        groups = req.trait_groups
        for combo in itertools.product(*opts):
            traits = frozenset().union(*(p.traits for p in combo))
            if all(traits & g for g in groups):
                yield combo

    # ------------------------------------------------------------ answers
    @staticmethod
    def freed(released: Mapping[str, Mapping[str, int]] | None) -> dict[tuple[str, str], int]:
        return {(rp, rc): n for rp, res in (released or {}).items()
                for rc, n in res.items()}

    def candidates(self, req: CandidateRequest,
                   released: Mapping[str, Mapping[str, int]] | None = None) -> dict:
        """Unlimited ``GET /allocation_candidates`` answer (order: roots by
        uuid)."""
        freed = self.freed(released)
        seen: set = set()
        areqs: list[dict] = []
        used: set[str] = set()
        for root in sorted(self.providers, key=lambda p: p.uuid):
            for combo in self.root_candidates(root, req, freed):
                allocs: dict[str, dict] = {}
                for rc, p in zip(req.resources, combo):
                    allocs.setdefault(p.uuid, {"resources": {}})["resources"][rc] = \
                        req.resources[rc]
                key = tuple(sorted((u, tuple(sorted(r["resources"].items())))
                                   for u, r in allocs.items()))
                if key in seen:
                    continue
                seen.add(key)
                used.update(allocs)
                areqs.append({"allocations": allocs,
                              "mappings": {"": sorted(allocs)}})
        summaries = {}
        for u in sorted(used):
            p = self.by_uuid[u]
            summaries[u] = {
                "resources": {rc: {"capacity": int((inv[0] - inv[1]) * inv[5]),
                                   "used": p.used.get(rc, 0) - freed.get((u, rc), 0)}
                              for rc, inv in p.inventories.items()},
                "traits": sorted(p.traits), "parent_provider_uuid": None,
                "root_provider_uuid": u}
        return {"allocation_requests": areqs, "provider_summaries": summaries}

    def fitting_roots(self, req: CandidateRequest,
                      released: Mapping[str, Mapping[str, int]] | None = None,
                      include_sharing_roots: bool = False) -> list[str]:
        """Roots with at least one candidate (the scheduler's question)."""
        freed = self.freed(released)
        return [p.uuid for p in self.providers
                if (include_sharing_roots or SHARING not in p.traits)
                and next(self.root_candidates(p, req, freed), None) is not None]

    def select(self, req: CandidateRequest, multipliers: Mapping[str, float],
               k: int = 1) -> list[tuple[str, float]]:
        """Fitting roots weighed nova's way (free units of the root's own
        inventory of each class, normalized), best ``k`` by weight then uuid."""
        fit = []
        for p in self.providers:
            if SHARING in p.traits:
                continue
            first = next(self.root_candidates(p, req), None)
            if first is not None:
                fit.append((p, first))
        weights = [0.0] * len(fit)
        for rc, mult in multipliers.items():
            if not mult:
                continue
            values = []
            for p, combo in fit:
                supplier = combo[list(req.resources).index(rc)] if rc in req.resources else p
                inv = supplier.inventories.get(rc)
                values.append(0 if inv is None else
                              math.floor((inv[0] - inv[1]) * inv[5]) - supplier.used.get(rc, 0))
            if values:
                lo, hi = min(values), max(values)
                for i, v in enumerate(values):
                    weights[i] += mult * (0.0 if hi == lo else (v - lo) / (hi - lo))
        ranked = sorted(range(len(fit)), key=lambda i: (-weights[i], fit[i][0].uuid))
        return [(fit[i][0].uuid, weights[i]) for i in ranked[:k]]
