"""Placement's capacity check of an allocation write
(placement-semantics.md section 1, write path), on plain data: the embedded
placement calls it with the write's rows (``rows``), usage and
inventories."""

from __future__ import annotations

from typing import Mapping

from scheduler_ext import errors
from scheduler_ext.placement.model import AllocationWrite, Inventory

#: (consumer, provider, class, amount) of a write; amount 0 marks a row of
#: a consumer being emptied
Row = tuple[str, str, str, int]


def rows(writes: Mapping[str, AllocationWrite],
         held: Mapping[str, Mapping[str, Mapping[str, int]]]) -> list[Row]:
    """The rows of ``writes`` (consumer -> write); ``held``: what each
    written consumer holds now, whose rows (amount 0) an emptying write
    names."""
    out: list[Row] = []
    for c, write in writes.items():
        if write.allocations:
            out += [(c, rp, rc, n) for rp, res in write.allocations.items()
                    for rc, n in res.items()]
        else:
            out += [(c, rp, rc, 0) for rp, res in held[c].items() for rc in res]
    return out


def check(rows: list[Row], usage: Mapping[tuple[str, str], int],
          old: Mapping[str, Mapping[str, Mapping[str, int]]],
          inventories: Mapping[str, Mapping[str, Inventory]]) -> None:
    """CapacityExceeded unless every row of the write fits.

    ``usage`` is the usage per (provider, class) before the write, ``old``
    what the written consumers hold now (dropped first, as placement does),
    ``inventories`` the inventories of every provider the rows name.
    Amounts summed per (provider, class) are held against the float
    capacity ``(total - reserved) * allocation_ratio``; min/max/step are
    checked per row; a provider already over capacity accepts a write that
    does not raise its usage.
    """
    # usage once the written consumers are dropped, for the rows' keys only
    # (the cost of a write is its size, not the placement's); ``usage``
    # itself is not changed here, so it still gives the usage before
    used: dict[tuple[str, str], int] = {}
    rcs: set[str] = set()
    for _, rp, rc, _ in rows:
        rcs.add(rc)
        if (rp, rc) not in used:
            used[(rp, rc)] = usage.get((rp, rc), 0)
    for allocs in old.values():
        for rp, res in allocs.items():
            for rc, n in res.items():
                if (rp, rc) in used:
                    used[(rp, rc)] -= n
    missing = sorted({rp for _, rp, _, _ in rows if rcs.isdisjoint(inventories[rp])})
    if missing:
        raise errors.CapacityExceeded(
            f"unable to allocate inventory: no inventory of "
            f"{', '.join(sorted(rcs))} on {', '.join(missing)}")
    for c, rp, rc, n in rows:
        used[(rp, rc)] += n
        if n == 0:
            continue
        inv = inventories[rp].get(rc)
        if inv is None:
            raise errors.CapacityExceeded(
                f"unable to allocate inventory: provider {rp} has no {rc} "
                "inventory")
        if n < inv.min_unit or n > inv.max_unit or n % inv.step_size:
            raise errors.CapacityExceeded(
                f"unable to allocate inventory: {rc}={n} for consumer {c} on "
                f"{rp} violates min_unit {inv.min_unit}, max_unit "
                f"{inv.max_unit} or step_size {inv.step_size}")
        after = used[(rp, rc)]
        if inv.capacity < after:
            before = usage.get((rp, rc))
            if before is None or after > before:
                raise errors.CapacityExceeded(
                    f"unable to allocate inventory: {rc} on {rp} would use "
                    f"{after} of capacity {inv.capacity:g}")
