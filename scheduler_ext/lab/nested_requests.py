"""Random queries for a nested fleet (``nested.random_nested_fleet``).

Each query is aimed at one tree of the fleet: most amounts fit a member of
that tree (or a sharing provider serving it), the rest sit on a capacity or
unit edge. It has the unnumbered group most of the time and zero to three
granular groups -- bandwidth (``NET_BW_*`` with physnet and vnic traits),
vGPU (``VGPU`` with a type trait), VCPU (drawn from the same providers as
the unnumbered group's), disk (a sharing provider can fill a granular
group) and a resourceless NIC-agent group tied to a bandwidth group by
``same_subtree`` -- with ``group_policy`` none or isolate, and traits,
aggregates, ``in_tree`` and root traits now and then.
"""

from __future__ import annotations

import random
import uuid as uuidlib

from scheduler_ext import errors
from scheduler_ext.lab.nested import AGENT, EGR, IGR, PHYSNETS, VGPU_TYPES, VNICS
from scheduler_ext.lab.synthetic import (CUSTOM_TRAITS, SHARING, STANDARD_TRAITS,
                                         FleetSpec, ProviderSpec, chunk)
from scheduler_ext.placement.query import CandidateRequest, RequestGroup


class _View:
    """What the generator reads of a fleet spec."""

    def __init__(self, spec: FleetSpec):
        self.spec = spec
        self.used: dict[tuple[str, str], int] = {}
        for allocs in spec.consumers.values():
            for rp, res in allocs.items():
                for rc, n in res.items():
                    self.used[(rp, rc)] = self.used.get((rp, rc), 0) + n
        self.root_of = {p.uuid: p.uuid for p in spec.providers}
        for p in spec.providers:
            if p.parent:
                self.root_of[p.uuid] = self.root_of[p.parent]
        self.roots = [p for p in spec.providers if p.parent is None]
        #: chance that an amount sits on an edge (set per query)
        self.edges = 0.1

    def members(self, root: str) -> list[ProviderSpec]:
        return [p for p in self.spec.providers if self.root_of[p.uuid] == root]

    def amount(self, rc: str, pool: list[ProviderSpec], rng: random.Random,
               prefer: ProviderSpec | None = None) -> int:
        """Mostly a fitting amount of ``rc`` at one of ``pool`` (at
        ``prefer`` when it holds ``rc``), else an edge value."""
        holders = [p for p in pool if rc in p.inventories] or [
            p for p in self.spec.providers if rc in p.inventories]
        if not holders:
            return rng.randint(1, 8)
        usable = [p for p in holders if p.inventories[rc].reserved < p.inventories[rc].total]
        p = prefer if prefer is not None and rc in prefer.inventories \
            else rng.choice(usable or holders)
        inv = p.inventories[rc]
        free = int((inv.total - inv.reserved) * inv.allocation_ratio) \
            - self.used.get((p.uuid, rc), 0)
        n = 0
        if rng.random() >= self.edges:
            for k in rng.sample([1, 2, 4], 3):
                n = n or chunk(inv, free // k, rng)
        if not n:
            n = rng.choice([1, inv.min_unit, inv.step_size, free, free + 1,
                            inv.max_unit, max(1, free // 2)])
        return max(1, min(n, 10**6))


def random_nested_requests(spec: FleetSpec, rng: random.Random,
                           count: int) -> list[CandidateRequest]:
    """``count`` queries (see the module docstring)."""
    view = _View(spec)
    out: list[CandidateRequest] = []
    for _ in range(count * 10):
        if len(out) == count:
            break
        try:
            out.append(_one(view, rng))
        except errors.InvalidRequest:   # a drawn conflict
            continue
    return out


def _one(view: _View, rng: random.Random) -> CandidateRequest:
    view.edges = 0.3 if rng.random() < 0.3 else 0.0
    root = rng.choice(view.roots)
    members = view.members(root.uuid)
    pool = members + [p for p in view.spec.providers if SHARING in p.traits
                      and (p.aggregates & {a for m in members for a in m.aggregates})]
    have = {rc for p in pool for rc in p.inventories}
    kw: dict = {"resources": {}}
    if rng.random() < 0.85:
        base = [rc for rc in ("VCPU", "MEMORY_MB", "DISK_GB") if rc in have] \
            if rng.random() < 0.95 else ["VCPU", "MEMORY_MB", "DISK_GB"]
        classes = rng.sample(base, rng.randint(1, len(base))) if base else ["VCPU"]
        for rc, p in ((view.spec.custom_rc, 0.15), ("VGPU", 0.1), (EGR, 0.05)):
            if rng.random() < p and (rc in have or rng.random() < 0.2):
                classes.append(rc)
        target = rng.choice([p for p in pool if set(classes) & set(p.inventories)] or pool)
        kw["resources"] = {rc: view.amount(rc, pool, rng, target) for rc in classes}
        if rng.random() < 0.5:
            kw.update(_filters(view, root, rng))
    possible = [k for k, rc in (("bw", EGR), ("vgpu", "VGPU"), ("vcpu", "VCPU"),
                                ("disk", "DISK_GB")) if rc in have]
    possible += ["agent"] if any(AGENT in p.traits for p in members) else []
    if rng.random() < 0.2 or not possible:
        possible = ["bw", "vgpu", "vcpu", "disk", "agent"]
    if sum(EGR in p.inventories for p in members) > 1:
        possible.append("bw")
    k = min(len(possible), rng.choice([0, 1, 1, 2, 2, 3]))
    kinds = rng.sample(possible, k) if rng.random() < 0.85 else \
        [rng.choice(possible) for _ in range(k)]
    if not kw["resources"] and not [k for k in kinds if k != "agent"]:
        kinds.append("vgpu")
    suffixes = iter(rng.sample(["1", "2", "3", "_NIC", "_GPU", "_X",
                                str(uuidlib.UUID(int=rng.getrandbits(128)))], 6))
    groups = [_granular(kind, next(suffixes), view, pool, rng) for kind in kinds]
    kw["granular"] = tuple(groups)
    if groups:
        kw["group_policy"] = rng.choice(["none", "isolate"])
    kw["same_subtree"] = _subtrees(groups, rng)
    if rng.random() < 0.2:
        kw["root_forbidden"] = frozenset(["COMPUTE_STATUS_DISABLED"])
    elif rng.random() < 0.08:
        kw["root_required"] = frozenset([rng.choice(sorted(root.traits) or ["HW_CPU_X86_AVX2"])])
    return CandidateRequest(**kw)


def _granular(kind: str, suffix: str, view: _View, pool: list[ProviderSpec],
              rng: random.Random) -> RequestGroup:
    kw: dict = {}
    if kind == "bw":
        nics = [p for p in pool if EGR in p.inventories]
        nic = rng.choice(nics) if nics else None
        kw["resources"] = {rc: view.amount(rc, nics, rng, nic) for rc in (
            [EGR, IGR] if nic is not None and IGR in nic.inventories
            and rng.random() < 0.7 else [EGR])}
        traits = sorted(nic.traits) if nic is not None and rng.random() < 0.8 \
            else [rng.choice(PHYSNETS), rng.choice(VNICS)]
        kw["required"] = frozenset(rng.sample(traits, rng.randint(1, len(traits))))
    elif kind == "vgpu":
        kw["resources"] = {"VGPU": view.amount("VGPU", pool, rng)}
        if rng.random() < 0.5:
            gpus = [t for p in pool for t in p.traits if t in VGPU_TYPES]
            kw["required"] = frozenset([rng.choice(gpus or list(VGPU_TYPES))])
    elif kind in ("vcpu", "disk"):
        rc = "VCPU" if kind == "vcpu" else "DISK_GB"
        kw["resources"] = {rc: view.amount(rc, pool, rng)}
    else:
        kw["required"] = frozenset([AGENT])
    if rng.random() < 0.08:
        kw["forbidden"] = frozenset([rng.choice(CUSTOM_TRAITS + VNICS)])
    if rng.random() < 0.08:
        kw["member_of"] = (frozenset(rng.sample(view.spec.aggregates, 1)),)
    if rng.random() < 0.05:
        kw["forbidden_aggregates"] = frozenset(rng.sample(view.spec.aggregates, 1))
    if rng.random() < 0.06:
        kw["in_tree"] = rng.choice(pool).uuid
    if rng.random() < 0.05:
        kw["required_any"] = (frozenset(rng.sample(CUSTOM_TRAITS + VGPU_TYPES, 2)),)
    return RequestGroup(suffix, **kw)


def _subtrees(groups: list[RequestGroup], rng: random.Random) -> tuple:
    """Every resourceless group goes with a bandwidth group (or another
    group); sometimes two resourced groups are tied too."""
    out = []
    resourced = [g for g in groups if g.resources]
    nic = [g for g in resourced if EGR in g.resources] or resourced
    for g in groups:
        if not g.resources:
            out.append(frozenset([g.suffix] + ([rng.choice(nic).suffix] if nic else [])))
    if len(resourced) > 1 and rng.random() < 0.2:
        out.append(frozenset(g.suffix for g in rng.sample(resourced, 2)))
    return tuple(out)


def _filters(view: _View, root: ProviderSpec, rng: random.Random) -> dict:
    """The unnumbered group's traits, aggregates and tree."""
    traits = list(CUSTOM_TRAITS + STANDARD_TRAITS + VGPU_TYPES + PHYSNETS)
    mine = sorted({t for p in view.members(root.uuid) for t in p.traits} - {SHARING})
    pick = lambda: (rng.choice(mine) if mine and rng.random() < 0.6  # noqa: E731
                    else rng.choice(traits))
    aggs = view.spec.aggregates
    kw: dict = {}
    if rng.random() < 0.15:
        kw["required"] = frozenset([pick()])
    if rng.random() < 0.1:
        kw["forbidden"] = frozenset([rng.choice(traits)])
    if rng.random() < 0.05:
        kw["required_any"] = (frozenset([pick(), rng.choice(traits)]),)
    if rng.random() < 0.15:
        kw["member_of"] = tuple(frozenset(rng.sample(aggs, rng.randint(1, len(aggs))))
                                for _ in range(rng.choice([1, 1, 2])))
    if rng.random() < 0.08:
        kw["forbidden_aggregates"] = frozenset(rng.sample(aggs, 1))
    if rng.random() < 0.05:
        kw["in_tree"] = rng.choice(view.members(root.uuid)).uuid
    return kw
