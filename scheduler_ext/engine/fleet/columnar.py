"""A column-oriented fleet description: the bulk input of ``CapacityIndex``.

``FleetSnapshot`` (one Python record per provider) is convenient for
thousands of providers; at a million it costs gigabytes. ``ColumnarFleet``
carries the same facts as arrays, so a bulk source (a read-only SQL query on
placement's database, a benchmark generator) can feed the index directly.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from scheduler_ext.placement.model import FleetSnapshot


@dataclasses.dataclass
class InventoryColumns:
    """Inventories of one resource class: parallel arrays, one entry per
    provider that has the class (``rows`` are provider rows, distinct).
    ``used`` is the summed allocations (units of the class)."""

    rows: np.ndarray
    total: np.ndarray
    reserved: np.ndarray
    min_unit: np.ndarray
    max_unit: np.ndarray
    step_size: np.ndarray
    allocation_ratio: np.ndarray
    used: np.ndarray


@dataclasses.dataclass
class ColumnarFleet:
    """Providers as rows ``0..n-1``.

    * ``uuids``/``generations``: identity, one per row.
    * ``parents``/``roots``: parent and root uuid per row, or ``None`` when
      every provider is a root (a flat fleet).
    * ``trait_sets[trait_set_of[r]]`` are row ``r``'s trait names;
      ``aggregate_sets[aggregate_set_of[r]]`` its aggregate uuids (distinct
      sets listed once, so a million rows share a few hundred sets).
    """

    uuids: Sequence[str]
    generations: np.ndarray
    inventories: dict[str, InventoryColumns]
    trait_sets: list[frozenset[str]]
    trait_set_of: np.ndarray
    aggregate_sets: list[frozenset[str]]
    aggregate_set_of: np.ndarray
    parents: Sequence[str | None] | None = None
    roots: Sequence[str] | None = None

    def __len__(self) -> int:
        return len(self.uuids)

    @classmethod
    def from_snapshot(cls, snapshot: FleetSnapshot) -> "ColumnarFleet":
        """Convert a record-per-provider snapshot (O(providers))."""
        recs = snapshot.providers
        uuids = [r.provider.uuid for r in recs]
        gens = np.array([r.provider.generation for r in recs], np.int64)
        cols: dict[str, list] = {}
        for row, rec in enumerate(recs):
            for rc, inv in rec.inventories.items():
                cols.setdefault(rc, []).append(
                    (row, inv.total, inv.reserved, inv.min_unit, inv.max_unit,
                     inv.step_size, inv.allocation_ratio,
                     int(rec.usages.get(rc, 0))))
        inventories = {}
        for rc, items in cols.items():
            t = list(zip(*items))
            inventories[rc] = InventoryColumns(
                rows=np.array(t[0], np.int64), total=np.array(t[1], np.int64),
                reserved=np.array(t[2], np.int64), min_unit=np.array(t[3], np.int64),
                max_unit=np.array(t[4], np.int64), step_size=np.array(t[5], np.int64),
                allocation_ratio=np.array(t[6], np.float64),
                used=np.array(t[7], np.int64))
        tsets, tof = _intern([frozenset(r.traits) for r in recs])
        asets, aof = _intern([frozenset(r.aggregates) for r in recs])
        nested = any(r.provider.parent_provider_uuid for r in recs)
        return cls(uuids=uuids, generations=gens, inventories=inventories,
                   trait_sets=tsets, trait_set_of=tof, aggregate_sets=asets,
                   aggregate_set_of=aof,
                   parents=[r.provider.parent_provider_uuid for r in recs] if nested else None,
                   roots=[r.provider.root_provider_uuid for r in recs] if nested else None)


def _intern(sets: list[frozenset[str]]) -> tuple[list[frozenset[str]], np.ndarray]:
    index: dict[frozenset[str], int] = {}
    of = np.array([index.setdefault(s, len(index)) for s in sets], np.int64)
    return list(index), of
