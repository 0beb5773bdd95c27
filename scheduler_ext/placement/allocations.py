"""Arithmetic on allocation sets: ``{provider uuid: {resource class: units}}``.

The one home of sum, difference, maximum, copy and merge of allocations;
every function returns a new plain ``dict`` unless it says it works in
place, and none keeps an entry of zero units or an empty provider.
"""

from __future__ import annotations

from typing import Any, Mapping

from scheduler_ext.placement import validation
from scheduler_ext.placement.model import Allocations, WritableAllocations


def copy(allocs: Allocations) -> WritableAllocations:
    """A writable copy, zero entries and empty providers dropped."""
    return {rp: {rc: n for rc, n in res.items() if n}
            for rp, res in allocs.items() if any(res.values())}


def add(total: WritableAllocations, allocs: Allocations, sign: int = 1) -> WritableAllocations:
    """Add (``sign=1``) or subtract (``sign=-1``) ``allocs`` into ``total``
    in place; entries that reach zero are dropped. Returns ``total``."""
    for rp, resources in allocs.items():
        row = total.setdefault(rp, {})
        for rc, n in resources.items():
            value = row.get(rc, 0) + sign * n
            if value:
                row[rc] = value
            else:
                row.pop(rc, None)
        if not row:
            total.pop(rp, None)
    return total


def total(*sets: Allocations) -> WritableAllocations:
    """The sum of several allocation sets, per (provider, class)."""
    out: WritableAllocations = {}
    for allocs in sets:
        add(out, allocs)
    return out


def per_class_max(a: Allocations, b: Allocations) -> WritableAllocations:
    """Per (provider, class) maximum of two allocation sets."""
    out = copy(a)
    for rp, res in b.items():
        for rc, n in res.items():
            if n:
                row = out.setdefault(rp, {})
                row[rc] = max(row.get(rc, 0), n)
    return out


def merge_missing(a: Allocations, b: Allocations) -> WritableAllocations:
    """``a`` plus, per provider, the classes of ``b`` that ``a`` does not
    name there."""
    out = copy(a)
    for rp, res in b.items():
        for rc, n in res.items():
            if n:
                out.setdefault(rp, {}).setdefault(rc, n)
    return out


def only_classes(allocs: Allocations, keep: set[str] | frozenset[str],
                 exclude: bool = False) -> WritableAllocations:
    """The entries of the classes in ``keep`` (or, with ``exclude``, of the
    classes not in it)."""
    return copy({rp: {rc: n for rc, n in res.items()
                      if (rc in keep) != exclude}
                 for rp, res in allocs.items()})


def class_totals(allocs: Allocations) -> dict[str, int]:
    """Units per resource class, summed over providers (zero sums dropped)."""
    out: dict[str, int] = {}
    for res in allocs.values():
        for rc, n in res.items():
            out[rc] = out.get(rc, 0) + n
    return {rc: n for rc, n in out.items() if n}


def classes(allocs: Allocations) -> set[str]:
    """Every resource class named in ``allocs``."""
    return {rc for res in allocs.values() for rc in res}


def from_request(allocation_request: Mapping) -> WritableAllocations:
    """The allocations of placement's allocation-request body
    (``{"allocations": {rp: {"resources": {rc: n}}}}``)."""
    return {rp: dict(v["resources"])
            for rp, v in allocation_request["allocations"].items()}


def normalized_list(value: Any, field: str) -> list[WritableAllocations]:
    """Validated ``{rp: {rc: n}}`` dicts from any of: ``{rp: {rc: n}}``,
    placement's body shapes ``{rp: {"resources": {rc: n}}}`` and
    ``{"allocations": {...}}``, a list of those, or None (nothing)."""
    if value is None:
        return []
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if not isinstance(item, Mapping):
            raise validation.bad(field, item, "must be a mapping of provider to resources")
        if isinstance(item.get("allocations"), Mapping):
            item = item["allocations"]
        plain = {rp: (res["resources"] if isinstance(res, Mapping)
                      and isinstance(res.get("resources"), Mapping) else res)
                 for rp, res in item.items()}
        out.append(validation.allocations(plain, field))
    return out
