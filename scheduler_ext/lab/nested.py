"""Nested fleets and granular queries for tests (seeded).

``random_nested_fleet(seed)``: compute-node trees one to three levels
deep -- NUMA children holding VCPU/MEMORY_MB, a NIC agent (no inventory)
with bandwidth-like NIC children (``NET_BW_*`` with physnet and vnic
traits), vGPU-like pGPU children (``VGPU`` with a type trait) -- beside
flat compute nodes and sharing providers (DISK_GB, sometimes more), with
the capacity corner cases of ``synthetic`` (reserved, fractional ratios,
min/max/step, usage near capacity). ``synthetic.load`` writes one through
any ``PlacementClient``; ``nested_requests`` draws queries for it.
"""

from __future__ import annotations

import random
from typing import Iterable

import numpy as np

from scheduler_ext.engine.fleet.columnar import ColumnarFleet, InventoryColumns
from scheduler_ext.lab.synthetic import (CUSTOM_TRAITS, SHARING, STANDARD_TRAITS,
                                         FleetSpec, ProviderSpec, chunk, new_uuid,
                                         random_inventory)
from scheduler_ext.placement.model import Inventory

PHYSNETS = ("CUSTOM_PHYSNET_NET0", "CUSTOM_PHYSNET_NET1")
VNICS = ("CUSTOM_VNIC_TYPE_NORMAL", "CUSTOM_VNIC_TYPE_DIRECT")
VGPU_TYPES = ("CUSTOM_VGPU_TYPE_A", "CUSTOM_VGPU_TYPE_B")
AGENT = "CUSTOM_NIC_AGENT"
NESTED_TRAITS = PHYSNETS + VNICS + VGPU_TYPES + (AGENT,)
EGR, IGR = "NET_BW_EGR_KILOBIT_PER_SEC", "NET_BW_IGR_KILOBIT_PER_SEC"


class _Builder:
    def __init__(self, rng: random.Random, tag: str, aggs: list[str]):
        self.rng, self.tag, self.aggs = rng, tag, aggs
        self.providers: list[ProviderSpec] = []

    def add(self, kind: str, invs: dict, traits, aggs=(), parent: str | None = None
            ) -> ProviderSpec:
        p = ProviderSpec(f"nested-{self.tag}-{kind}-{len(self.providers)}",
                         new_uuid(self.rng), invs, frozenset(traits),
                         frozenset(aggs), parent)
        self.providers.append(p)
        return p

    def some_aggs(self, k_max: int = 2) -> list[str]:
        return self.rng.sample(self.aggs, min(len(self.aggs), self.rng.randint(0, k_max)))

    def some_traits(self, p: float = 0.25) -> set[str]:
        return {t for t in CUSTOM_TRAITS + STANDARD_TRAITS if self.rng.random() < p}


def _bandwidth(rng: random.Random) -> Inventory:
    total = rng.choice([1000, 10000, 25000, 100000])
    return Inventory(total, reserved=rng.choice([0, 0, total // 10]),
                     max_unit=rng.choice([total, total, total // 2]),
                     step_size=rng.choice([1, 1, 1000]) if total >= 10000 else 1)


def _tree(b: _Builder, custom_rc: str) -> None:
    """One compute node and its children (see the module docstring)."""
    rng = b.rng
    numa = rng.random() < 0.3
    invs: dict[str, Inventory] = {}
    if not numa:
        invs = {"VCPU": random_inventory(rng, False),
                "MEMORY_MB": random_inventory(rng, True)}
    if rng.random() < 0.5:
        invs["DISK_GB"] = random_inventory(rng, False)
    if rng.random() < 0.2:
        invs[custom_rc] = random_inventory(rng, False)
    root = b.add("cn", invs, b.some_traits(), b.some_aggs())
    child_aggs = lambda: b.some_aggs(1) if rng.random() < 0.1 else []  # noqa: E731
    for _ in range(rng.randint(1, 2) if numa else 0):
        b.add("numa", {"VCPU": random_inventory(rng, False),
                       "MEMORY_MB": random_inventory(rng, True)},
              {"HW_NUMA_ROOT"} | b.some_traits(0.15), child_aggs(), root.uuid)
    if rng.random() < 0.6:
        agent = b.add("agent", {}, {AGENT} | ({rng.choice(VNICS)} if rng.random() < 0.5
                                                else set()), child_aggs(), root.uuid)
        for _ in range(rng.randint(1, 2)):
            nic = {EGR: _bandwidth(rng)}
            if rng.random() < 0.7:
                nic[IGR] = _bandwidth(rng)
            b.add("nic", nic, {rng.choice(PHYSNETS), rng.choice(VNICS)}, child_aggs(),
                  agent.uuid)
    for _ in range(rng.choice([0, 0, 1, 2])):
        gpu = Inventory(rng.randint(1, 8), max_unit=rng.choice([8, 8, 2]))
        b.add("pgpu", {"VGPU": gpu}, {rng.choice(VGPU_TYPES)} | b.some_traits(0.1),
              child_aggs(), root.uuid)


def _sharing(b: _Builder, custom_rc: str, in_trees: bool) -> None:
    rng = b.rng
    invs = {"DISK_GB": random_inventory(rng, False)}
    if rng.random() < 0.3:
        invs[custom_rc] = random_inventory(rng, False)
    if rng.random() < 0.15:
        invs["VGPU"] = Inventory(rng.randint(1, 4))
    aggs = b.some_aggs(2) or [rng.choice(b.aggs)]
    parent = None
    roots = [p for p in b.providers if p.parent is None and SHARING not in p.traits]
    if in_trees and roots and rng.random() < 0.3:
        parent = rng.choice(roots).uuid  # a sharing provider inside a tree
    b.add("ss", invs, {SHARING} | b.some_traits(0.2), aggs, parent)


def random_nested_fleet(seed: int, tag: str = "", *,
                        sharing_in_trees: bool = False) -> FleetSpec:
    """A random nested fleet (module docstring); ``tag`` makes names and
    the custom class unique when several fleets share one placement.
    ``sharing_in_trees`` puts some sharing providers inside trees (placement
    16.0.0 can answer such fleets with a 500, see
    ``docs/placement-nested-semantics.rst``)."""
    rng = random.Random(seed)
    tag = tag or f"N{seed}"
    custom_rc = f"CUSTOM_ENGINE_{tag}".upper()
    b = _Builder(rng, tag, [new_uuid(rng) for _ in range(rng.randint(1, 4))])
    for _ in range(rng.randint(2, 6)):
        _tree(b, custom_rc)
    for _ in range(rng.randint(0, 2)):
        b.add("flat", {"VCPU": random_inventory(rng, False),
                       "MEMORY_MB": random_inventory(rng, True)},
              b.some_traits(), b.some_aggs())
    for _ in range(rng.choice([0, 1, 1, 2])):
        _sharing(b, custom_rc, sharing_in_trees)
    consumers, mover = _usage(b.providers, rng)
    return FleetSpec(b.providers, custom_rc, b.aggs, consumers, mover,
                     extra_traits=NESTED_TRAITS)


def _usage(providers: list[ProviderSpec], rng: random.Random
           ) -> tuple[dict[str, dict[str, dict[str, int]]], str | None]:
    """Three consumers spread over everything, then a server (the mover):
    CPU/RAM in one tree and, when that tree has them, a vGPU and bandwidth
    on its children, disk locally or on a sharing provider."""
    room = {(p.uuid, rc): int((inv.total - inv.reserved) * inv.allocation_ratio)
            for p in providers for rc, inv in p.inventories.items()}
    consumers: dict[str, dict[str, dict[str, int]]] = {}
    for _ in range(3):
        cons: dict[str, dict[str, int]] = {}
        for p in providers:
            for rc, inv in p.inventories.items():
                if rng.random() < 0.3:
                    n = chunk(inv, int(room[(p.uuid, rc)] * rng.choice([0.1, 0.3, 0.6])), rng)
                    if n:
                        room[(p.uuid, rc)] -= n
                        cons.setdefault(p.uuid, {})[rc] = n
        if cons:
            consumers[new_uuid(rng)] = cons
    root_of = {p.uuid: p.uuid for p in providers}
    for p in providers:
        if p.parent:
            root_of[p.uuid] = root_of[p.parent]
    trees = [r for r in providers if r.parent is None and SHARING not in r.traits]
    server: dict[str, dict[str, int]] = {}
    for root in rng.sample(trees, len(trees)):
        members = [p for p in providers if root_of[p.uuid] == root.uuid]
        for rc in ("VCPU", "MEMORY_MB", "VGPU", EGR, "DISK_GB"):
            holders = [p for p in members if rc in p.inventories]
            if holders:
                p = rng.choice(holders)
                n = chunk(p.inventories[rc], room[(p.uuid, rc)], rng)
                if n:
                    room[(p.uuid, rc)] -= n
                    server.setdefault(p.uuid, {})[rc] = n
        if server:
            break
    if not server:
        return consumers, None
    mover = new_uuid(rng)
    consumers[mover] = server
    return consumers, mover


def spec_columnar(spec: FleetSpec, without: Iterable[str] = ()) -> ColumnarFleet:
    """``spec`` as a ``ColumnarFleet`` (for ``placement_db.load_placement_db``)
    with the usage of every consumer but those in ``without``."""
    skip = set(without)
    used: dict[tuple[str, str], int] = {}
    for consumer, allocs in spec.consumers.items():
        if consumer not in skip:
            for rp, res in allocs.items():
                for rc, n in res.items():
                    used[(rp, rc)] = used.get((rp, rc), 0) + n
    cols: dict[str, list] = {}
    for row, p in enumerate(spec.providers):
        for rc, inv in p.inventories.items():
            cols.setdefault(rc, []).append(
                (row, inv.total, inv.reserved, inv.min_unit, inv.max_unit,
                 inv.step_size, inv.allocation_ratio, used.get((p.uuid, rc), 0)))
    invs = {}
    for rc, items in cols.items():
        t = [np.array(x) for x in zip(*items)]
        i64 = [a.astype(np.int64) for a in t]
        invs[rc] = InventoryColumns(
            rows=i64[0], total=i64[1], reserved=i64[2], min_unit=i64[3],
            max_unit=i64[4], step_size=i64[5],
            allocation_ratio=t[6].astype(np.float64), used=i64[7])
    tsets = sorted({p.traits for p in spec.providers}, key=sorted)
    asets = sorted({p.aggregates for p in spec.providers}, key=sorted)
    root_of = {p.uuid: p.uuid for p in spec.providers}
    for p in spec.providers:
        if p.parent:
            root_of[p.uuid] = root_of[p.parent]
    return ColumnarFleet(
        uuids=[p.uuid for p in spec.providers],
        generations=np.ones(len(spec.providers), np.int64), inventories=invs,
        trait_sets=tsets, trait_set_of=np.array([tsets.index(p.traits) for p in spec.providers]),
        aggregate_sets=asets,
        aggregate_set_of=np.array([asets.index(p.aggregates) for p in spec.providers]),
        parents=[p.parent for p in spec.providers],
        roots=[root_of[p.uuid] for p in spec.providers])
