"""A nested fleet for benchmarks, built with numpy: ``n`` compute nodes,
each with three children -- two NICs holding bandwidth (``NET_BW_EGR`` /
``NET_BW_IGR`` in kbit/s; traits ``CUSTOM_PHYSNET_NET0`` or ``..._NET1``
and ``CUSTOM_VNIC_TYPE_NORMAL``) and a pGPU holding ``VGPU`` (trait
``CUSTOM_VGPU_TYPE_A``) -- and about 1% of ``n`` shared disk pools, as
``synthetic.bench_fleet``'s compute nodes (grouped 100 to an aggregate,
60-90% used, 2% disabled). Rows: each compute node followed by its
children, the pools last (the order placement's ids give)."""

from __future__ import annotations

import uuid as uuidlib

import numpy as np

from scheduler_ext.engine.fleet.columnar import ColumnarFleet, InventoryColumns
from scheduler_ext.lab.nested import EGR, IGR
from scheduler_ext.placement.model import SHARING_TRAIT

CHILDREN = 3
NIC_TRAITS = (frozenset({"CUSTOM_PHYSNET_NET0", "CUSTOM_VNIC_TYPE_NORMAL"}),
              frozenset({"CUSTOM_PHYSNET_NET1", "CUSTOM_VNIC_TYPE_NORMAL"}))
#: a port's group, as nova names it: suffixed with the port's uuid
PORT = "2f3c1a8e-5b4d-4c6e-9a7f-1e2d3c4b5a69"


def _uuids(rng: np.random.Generator, n: int) -> list[str]:
    return [str(uuidlib.UUID(bytes=bytes(b), version=4))
            for b in rng.integers(0, 256, (n, 16), dtype=np.uint8)]


def _column(rows, total, ratio, used_frac, reserved=0) -> InventoryColumns:
    total = np.asarray(total, np.int64)
    cap = np.floor((total - reserved) * ratio).astype(np.int64)
    used = np.minimum(cap, np.floor(cap * used_frac)).astype(np.int64)
    k = len(rows)
    return InventoryColumns(
        rows=np.asarray(rows, np.int64), total=total,
        reserved=np.full(k, reserved, np.int64), min_unit=np.ones(k, np.int64),
        max_unit=total.copy(), step_size=np.ones(k, np.int64),
        allocation_ratio=np.full(k, ratio, np.float64), used=used)


def nested_bench_fleet(n: int, seed: int = 0, *, hosts_per_aggregate: int = 100
                       ) -> ColumnarFleet:
    """``n`` compute nodes with their children and pools (module docstring)."""
    rng = np.random.default_rng(seed)
    n_share = max(1, n // 100)
    width = 1 + CHILDREN
    total = n * width + n_share
    uuids = _uuids(rng, total)
    cn = np.arange(n) * width
    nic0, nic1, gpu = cn + 1, cn + 2, cn + 3
    pools = np.arange(n * width, total)
    n_aggs = max(1, -(-n // hosts_per_aggregate))
    frac = rng.beta(4, 1.5, n)
    local = rng.random(n) < 0.5
    nics = np.concatenate([nic0, nic1])
    nic_total = rng.choice([10_000_000, 25_000_000], 2 * n)
    invs = {
        "VCPU": _column(cn, rng.choice([32, 48, 64, 96, 128], n), 4.0, frac),
        "MEMORY_MB": _column(cn, rng.choice([131072, 262144, 524288], n), 1.0, frac,
                             reserved=4096),
        "DISK_GB": _column(np.concatenate([cn[local], pools]),
                           np.concatenate([rng.choice([960, 1920, 3840], local.sum()),
                                           rng.choice([100000, 200000], n_share)]),
                           1.0, np.concatenate([frac[local], rng.beta(3, 2, n_share)])),
        EGR: _column(nics, nic_total, 1.0, rng.beta(2, 2, 2 * n)),
        IGR: _column(nics, nic_total, 1.0, rng.beta(2, 2, 2 * n)),
        "VGPU": _column(gpu, rng.choice([4, 8, 16], n), 1.0, rng.beta(2, 2, n)),
    }
    trait_sets = [frozenset(), frozenset({"HW_CPU_X86_AVX2"}),
                  frozenset({"HW_CPU_X86_AVX2", "STORAGE_DISK_SSD"}),
                  frozenset({"COMPUTE_STATUS_DISABLED"}), frozenset({SHARING_TRAIT}),
                  NIC_TRAITS[0], NIC_TRAITS[1], frozenset({"CUSTOM_VGPU_TYPE_A"})]
    trait_of = np.empty(total, np.int64)
    trait_of[cn] = rng.choice([0, 1, 2, 3], n, p=[0.3, 0.4, 0.28, 0.02])
    trait_of[nic0], trait_of[nic1], trait_of[gpu] = 5, 6, 7
    trait_of[pools] = 4
    agg_uuids = _uuids(rng, n_aggs)
    agg_sets: list[frozenset[str]] = [frozenset()] + [frozenset({a}) for a in agg_uuids]
    agg_of = np.zeros(total, np.int64)
    agg_of[cn] = 1 + np.arange(n) // hosts_per_aggregate
    agg_of[pools] = 1 + np.arange(n_share) % n_aggs
    parents: list[str | None] = [None] * total
    roots = list(uuids)
    for k in range(1, width):
        for i in range(n):
            parents[i * width + k] = uuids[i * width]
            roots[i * width + k] = uuids[i * width]
    return ColumnarFleet(uuids=uuids, generations=np.ones(total, np.int64),
                         inventories=invs, trait_sets=trait_sets, trait_set_of=trait_of,
                         aggregate_sets=agg_sets, aggregate_set_of=agg_of,
                         parents=parents, roots=roots)
