"""Generated fleets and queries for tests and benchmarks (seeded).

* ``random_fleet(seed)``: a small fleet spec (5-30 providers) rich in the
  corner cases of placement-semantics.md: sharing providers, reserved,
  fractional ratios, min/max/step, traits, aggregates, usage near capacity,
  a custom resource class; ``load(client, spec)`` writes it through any
  ``PlacementClient`` (embedded or HTTP), ``random_requests`` draws queries.
* ``bench_fleet(n, seed)``: a ``ColumnarFleet`` of ``n`` providers (about
  1% sharing disk pools) built with numpy, for ``scheduler-ext bench``.
"""

from __future__ import annotations

import dataclasses
import random
import uuid as uuidlib
import numpy as np

from scheduler_ext import errors
from scheduler_ext.engine.fleet.columnar import ColumnarFleet, InventoryColumns
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.placement.model import MAX_INT, AllocationWrite, Inventory

from scheduler_ext.placement.model import SHARING_TRAIT as SHARING  # noqa: E402
#: Custom traits the random fleets use (created once, shared by fleets).
CUSTOM_TRAITS = ("CUSTOM_ENGINE_T1", "CUSTOM_ENGINE_T2", "CUSTOM_ENGINE_T3")
STANDARD_TRAITS = ("HW_CPU_X86_AVX2", "STORAGE_DISK_SSD", "COMPUTE_STATUS_DISABLED")
_RATIOS = (1.0, 1.0, 0.57, 0.7, 1.5, 16.0, 0.1, 2.5, 1 / 3, 0.9)


@dataclasses.dataclass
class ProviderSpec:
    """``parent``: the parent's uuid (listed before its children), None for
    a root."""

    name: str
    uuid: str
    inventories: dict[str, Inventory]
    traits: frozenset[str]
    aggregates: frozenset[str]
    parent: str | None = None


@dataclasses.dataclass
class FleetSpec:
    """``consumers``: consumer uuid -> ``{rp: {rc: n}}``; ``mover`` names
    the consumer standing for a server being moved (its allocations are the
    ``released`` of move queries)."""

    providers: list[ProviderSpec]
    custom_rc: str
    aggregates: list[str]
    consumers: dict[str, dict[str, dict[str, int]]]
    mover: str | None
    #: custom traits besides ``CUSTOM_TRAITS`` that ``load`` creates
    extra_traits: tuple[str, ...] = ()

    @property
    def uuids(self) -> set[str]:
        return {p.uuid for p in self.providers}


def new_uuid(rng: random.Random) -> str:
    return str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


def random_inventory(rng: random.Random, big: bool) -> Inventory:
    total = rng.choice([rng.randint(1, 40), rng.randint(40, 400)]) * (64 if big else 1)
    reserved = rng.choice([0, 0, 0, rng.randint(0, total // 4), total])
    min_unit = rng.choice([1, 1, 1, 2, 4])
    step = rng.choice([1, 1, 1, 2, 3, 4])
    max_unit = rng.choice([MAX_INT, MAX_INT, total,
                           max(min_unit, rng.randint(1, max(1, total // 2)))])
    return Inventory(total=total, reserved=reserved, min_unit=min_unit,
                     max_unit=max(max_unit, min_unit), step_size=step,
                     allocation_ratio=rng.choice(_RATIOS))


def chunk(inv: Inventory, room: int, rng: random.Random) -> int:
    """An allocation amount valid for ``inv`` (min/max/step) and <= room; 0
    if none exists."""
    lo = -(-inv.min_unit // inv.step_size) * inv.step_size
    hi = min(room, inv.max_unit) // inv.step_size * inv.step_size
    if hi < lo or hi <= 0:
        return 0
    # near the top half of the time: usage near capacity
    if rng.random() < 0.5:
        return hi
    return rng.randrange(lo, hi + 1, inv.step_size)


def random_fleet(seed: int, size: tuple[int, int] = (5, 30), tag: str = "") -> FleetSpec:
    """A random flat fleet; ``tag`` makes names and the custom class unique
    when several fleets share one placement."""
    rng = random.Random(seed)
    tag = tag or f"S{seed}"
    custom_rc = f"CUSTOM_ENGINE_{tag}".upper()
    aggs = [new_uuid(rng) for _ in range(rng.randint(1, 4))]
    n = rng.randint(*size)
    providers = []
    for i in range(n):
        sharing = rng.random() < 0.18
        invs: dict[str, Inventory] = {}
        if sharing:
            invs["DISK_GB"] = random_inventory(rng, False)
            if rng.random() < 0.3:
                invs[custom_rc] = random_inventory(rng, False)
            if rng.random() < 0.15:
                invs["VCPU"] = random_inventory(rng, False)
        elif rng.random() < 0.93:
            invs["VCPU"] = random_inventory(rng, False)
            invs["MEMORY_MB"] = random_inventory(rng, True)
            if rng.random() < 0.5:
                invs["DISK_GB"] = random_inventory(rng, False)
            if rng.random() < 0.3:
                invs[custom_rc] = random_inventory(rng, False)
        traits = {t for t in CUSTOM_TRAITS + STANDARD_TRAITS if rng.random() < 0.25}
        if sharing:
            traits.add(SHARING)
        k = rng.choice([0, 1, 1, 1, 2, 2, 3])
        providers.append(ProviderSpec(
            name=f"engine-{tag}-{i}", uuid=new_uuid(rng), inventories=invs,
            traits=frozenset(traits),
            aggregates=frozenset(rng.sample(aggs, min(k, len(aggs))))))
    # usage: up to three consumers, one row per (provider, class) each
    consumers: dict[str, dict[str, dict[str, int]]] = {}
    room = {(p.uuid, rc): int((inv.total - inv.reserved) * inv.allocation_ratio)
            for p in providers for rc, inv in p.inventories.items()}
    for _ in range(3):
        cons: dict[str, dict[str, int]] = {}
        for p in providers:
            for rc, inv in p.inventories.items():
                if rng.random() < 0.45:
                    share = rng.choice([0.15, 0.3, 0.5, 1.0])
                    amount = chunk(inv, int(room[(p.uuid, rc)] * share), rng)
                    if amount:
                        room[(p.uuid, rc)] -= amount
                        cons.setdefault(p.uuid, {})[rc] = amount
        if cons:
            consumers[new_uuid(rng)] = cons
    mover = _mover(providers, room, rng)
    mover_uuid = None
    if mover:
        mover_uuid = new_uuid(rng)
        consumers[mover_uuid] = mover
    return FleetSpec(providers, custom_rc, aggs, consumers, mover_uuid)


def _mover(providers: list[ProviderSpec], room: dict, rng: random.Random
           ) -> dict[str, dict[str, int]] | None:
    """A server's allocations: CPU/RAM on a compute node, disk locally or
    on a sharing provider of one of its aggregates."""
    computes = [p for p in providers if "VCPU" in p.inventories
                and "MEMORY_MB" in p.inventories and SHARING not in p.traits]
    rng.shuffle(computes)
    for cn in computes:
        out: dict[str, dict[str, int]] = {}
        for rc in ("VCPU", "MEMORY_MB"):
            n = chunk(cn.inventories[rc], room[(cn.uuid, rc)], rng)
            if not n:
                break
            out.setdefault(cn.uuid, {})[rc] = n
        else:
            pools = [s for s in providers if SHARING in s.traits
                     and "DISK_GB" in s.inventories and s.aggregates & cn.aggregates]
            disk_from = rng.choice(pools) if pools and rng.random() < 0.7 else (
                cn if "DISK_GB" in cn.inventories else None)
            if disk_from is not None:
                n = chunk(disk_from.inventories["DISK_GB"],
                           room[(disk_from.uuid, "DISK_GB")], rng)
                if n:
                    out.setdefault(disk_from.uuid, {})["DISK_GB"] = n
            for rp, res in out.items():
                for rc, n in res.items():
                    room[(rp, rc)] -= n
            return out
    return None


def load(client, spec: FleetSpec, *, project: str = "engine-tests") -> None:
    """Write ``spec`` through a ``PlacementClient``: traits and the custom
    class, providers, inventories, traits, aggregates, then all consumers
    in one ``POST /allocations``."""
    for t in CUSTOM_TRAITS + spec.extra_traits:
        client.create_trait(t)
    client.create_resource_class(spec.custom_rc)
    for p in spec.providers:
        gen = client.create_provider(p.name, uuid=p.uuid,
                                     parent_provider_uuid=p.parent).generation
        if p.inventories:
            gen = client.set_inventories(p.uuid, gen, p.inventories)
        if p.traits:
            gen = client.set_traits(p.uuid, gen, p.traits)
        if p.aggregates:
            client.set_aggregates(p.uuid, gen, p.aggregates)
    if spec.consumers:
        client.post_allocations({
            c: AllocationWrite(allocs, project, project, None)
            for c, allocs in spec.consumers.items()})


def random_requests(spec: FleetSpec, rng: random.Random, count: int) -> list[CandidateRequest]:
    """``count`` queries over the fleet's classes, traits and aggregates.

    Each is aimed at a random provider: most amounts fit it (or a sharing
    provider of its aggregates), the rest sit on a capacity or unit edge;
    filters are drawn from that provider's traits/aggregates half the time.
    """
    classes = ["VCPU", "MEMORY_MB", "DISK_GB", spec.custom_rc]
    used: dict[tuple[str, str], int] = {}
    for allocs in spec.consumers.values():
        for rp, res in allocs.items():
            for rc, n in res.items():
                used[(rp, rc)] = used.get((rp, rc), 0) + n
    holders = {rc: [p for p in spec.providers if rc in p.inventories] for rc in classes}
    targets = [p for p in spec.providers if p.inventories] or spec.providers
    out = []
    for _ in range(count):
        target = rng.choice(targets)
        own = [rc for rc in classes if rc in target.inventories]
        rcs = rng.sample(own, min(len(own), rng.choice([1, 2, 3, 3]))) or ["VCPU"]
        if rng.random() < 0.3:
            rcs.append(rng.choice([rc for rc in classes if rc not in rcs]))
        resources = {rc: _amount(rc, target, holders, used, rng) for rc in rcs}
        kw = _filters(spec, target, rng)
        try:
            out.append(CandidateRequest(resources, **kw))
        except errors.InvalidRequest:  # a drawn conflict (required & forbidden)
            continue
    return out


def _amount(rc: str, target: ProviderSpec, holders: dict[str, list[ProviderSpec]],
            used: dict[tuple[str, str], int], rng: random.Random) -> int:
    """An amount of ``rc`` that mostly fits ``target`` (or a sharing
    provider of its aggregates), else one on a capacity or unit edge."""
    pools = [p for p in holders[rc] if p is target or (
        SHARING in p.traits and p.aggregates & target.aggregates)]
    pool = pools or holders[rc]
    if not pool:
        return rng.randint(1, 8)
    p = rng.choice(pool)
    inv = p.inventories[rc]
    free = int((inv.total - inv.reserved) * inv.allocation_ratio) \
        - used.get((p.uuid, rc), 0)
    amount = chunk(inv, free, rng) if rng.random() < 0.7 else 0
    if not amount:
        amount = rng.choice([1, inv.min_unit, inv.step_size * rng.randint(1, 3),
                             free, free + 1, inv.max_unit, inv.max_unit + 1,
                             max(1, free - inv.step_size)])
    return max(1, min(amount, 10**6))


def _filters(spec: FleetSpec, target: ProviderSpec, rng: random.Random) -> dict:
    """Trait, aggregate and tree filters, half of them from ``target``."""
    traits = list(CUSTOM_TRAITS + STANDARD_TRAITS)
    mine = sorted(target.traits - {SHARING})
    pick = lambda: (rng.choice(mine) if mine and rng.random() < 0.5  # noqa: E731
                    else rng.choice(traits))
    kw: dict = {}
    if rng.random() < 0.25:
        kw["required"] = frozenset([pick()])
    if rng.random() < 0.15:
        kw["forbidden"] = frozenset([rng.choice(traits)])
    if rng.random() < 0.1:
        kw["required_any"] = (frozenset([pick(), rng.choice(traits)]),)
    if rng.random() < 0.2:
        own_aggs = sorted(target.aggregates)
        kw["member_of"] = tuple(
            frozenset([rng.choice(own_aggs)] if own_aggs and rng.random() < 0.6
                      else rng.sample(spec.aggregates, rng.randint(1, len(spec.aggregates))))
            for _ in range(rng.choice([1, 1, 2])))
    if rng.random() < 0.1:
        kw["forbidden_aggregates"] = frozenset(rng.sample(spec.aggregates, 1))
    if rng.random() < 0.08:
        kw["in_tree"] = target.uuid if rng.random() < 0.7 else rng.choice(spec.providers).uuid
    if rng.random() < 0.15:
        kw["root_forbidden"] = frozenset(["COMPUTE_STATUS_DISABLED"])
    elif rng.random() < 0.08:
        kw["root_required"] = frozenset([pick()])
    return kw


def probe_fleet(tag: str) -> tuple[FleetSpec, dict[str, str]]:
    """placement-semantics.md's sharing probe -- CN1 (local disk, agg A),
    CN2 (aggs A, B; trait T2), CN3 (no aggregate), CN4 (agg C), SS1 (aggs
    A, C; sharing, T1), SS2 (agg A; sharing) -- plus ROUND (VCPU total 100,
    ratio 0.57), UNITS (MEMORY_MB min 128, max 800, step 64), SS3 (sharing
    disk, aggs D, E) and EMPTY (no inventory, trait T3, aggs E, F).
    Returns the spec and ``{name: uuid}`` for providers and aggregates A-F;
    T1-T3 are ``CUSTOM_TRAITS``."""
    rng = random.Random(tag)
    A, B, C, D, E, F = (new_uuid(rng) for _ in range(6))
    cpu = {"VCPU": Inventory(8), "MEMORY_MB": Inventory(4096)}
    disk = {"DISK_GB": Inventory(1000)}
    T1, T2, T3 = CUSTOM_TRAITS
    rows = [
        ("CN1", {**cpu, "DISK_GB": Inventory(100)}, [], [A]),
        ("CN2", cpu, [T2], [A, B]),
        ("CN3", cpu, [], []),
        ("CN4", cpu, [], [C]),
        ("SS1", disk, [SHARING, T1], [A, C]),
        ("SS2", disk, [SHARING], [A]),
        ("ROUND", {"VCPU": Inventory(100, allocation_ratio=0.57)}, [], []),
        ("UNITS", {"MEMORY_MB": Inventory(4096, min_unit=128, max_unit=800,
                                          step_size=64)}, [], []),
        ("SS3", disk, [SHARING], [D, E]),
        ("EMPTY", {}, [T3], [E, F]),
    ]
    names = dict(A=A, B=B, C=C, D=D, E=E, F=F)
    providers = []
    for name, invs, traits, aggs in rows:
        names[name] = new_uuid(rng)
        providers.append(ProviderSpec(f"engine-{tag}-{name}", names[name], invs,
                                      frozenset(traits), frozenset(aggs)))
    return FleetSpec(providers, f"CUSTOM_ENGINE_{tag}".upper(),
                     [A, B, C, D, E, F], {}, None), names


# ---------------------------------------------------------------- bench
def bench_fleet(n: int, seed: int = 0, *, sharing_fraction: float = 0.01,
                hosts_per_aggregate: int = 100) -> ColumnarFleet:
    """``n`` providers: compute nodes (VCPU, MEMORY_MB, half with local
    DISK_GB) grouped ``hosts_per_aggregate`` to an aggregate, about
    ``sharing_fraction`` of them shared disk pools (one per aggregate while
    they last), 60-90% used on average, 2% disabled, a few traits."""
    rng = np.random.default_rng(seed)
    n_share = max(1, int(round(n * sharing_fraction))) if n >= 2 else 0
    n_cn = n - n_share
    n_aggs = max(1, -(-n_cn // hosts_per_aggregate))
    agg_uuids = [str(uuidlib.UUID(bytes=bytes(b), version=4))
                 for b in rng.integers(0, 256, (n_aggs, 16), dtype=np.uint8)]
    uuids = [str(uuidlib.UUID(bytes=bytes(b), version=4))
             for b in rng.integers(0, 256, (n, 16), dtype=np.uint8)]
    cn = np.arange(n_cn)
    cn_agg = cn // hosts_per_aggregate
    sh = np.arange(n_cn, n)
    sh_agg = np.arange(n_share) % n_aggs

    def column(rows, total, ratio, used_frac, reserved=0, min_unit=1, step=1):
        total = np.asarray(total, np.int64)
        cap = np.floor((total - reserved) * ratio).astype(np.int64)
        used = np.minimum(cap, np.floor(cap * used_frac)).astype(np.int64)
        k = len(rows)
        return InventoryColumns(
            rows=rows, total=total, reserved=np.full(k, reserved, np.int64),
            min_unit=np.full(k, min_unit, np.int64),
            max_unit=total.copy(), step_size=np.full(k, step, np.int64),
            allocation_ratio=np.full(k, ratio, np.float64), used=used)

    frac = rng.beta(4, 1.5, n_cn)  # mean ~0.73
    vcpus = rng.choice([32, 48, 64, 96, 128], n_cn)
    mem = rng.choice([131072, 262144, 524288], n_cn)
    local_disk = rng.random(n_cn) < 0.5
    disk_rows = cn[local_disk]
    invs = {
        "VCPU": column(cn, vcpus, 4.0, frac),
        "MEMORY_MB": column(cn, mem, 1.0, frac, reserved=4096),
        "DISK_GB": column(
            np.concatenate([disk_rows, sh]),
            np.concatenate([rng.choice([960, 1920, 3840], len(disk_rows)),
                            rng.choice([100000, 200000], n_share)]),
            1.0, np.concatenate([frac[local_disk], rng.beta(3, 2, n_share)])),
    }
    trait_sets = [frozenset(), frozenset({"HW_CPU_X86_AVX2"}),
                  frozenset({"HW_CPU_X86_AVX2", "STORAGE_DISK_SSD"}),
                  frozenset({"COMPUTE_STATUS_DISABLED"}),
                  frozenset({SHARING})]
    trait_of = np.empty(n, np.int64)
    trait_of[:n_cn] = rng.choice([0, 1, 2, 3], n_cn, p=[0.3, 0.4, 0.28, 0.02])
    trait_of[n_cn:] = 4
    agg_sets = [frozenset({a}) for a in agg_uuids]
    agg_of = np.concatenate([cn_agg, sh_agg]).astype(np.int64)
    return ColumnarFleet(
        uuids=uuids, generations=np.ones(n, np.int64), inventories=invs,
        trait_sets=trait_sets, trait_set_of=trait_of,
        aggregate_sets=agg_sets, aggregate_set_of=agg_of)

