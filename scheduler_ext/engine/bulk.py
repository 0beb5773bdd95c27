"""Usage operations on ``CapacityIndex`` rows (usage replaced from
placement's usage aggregate, some rows' or one row's usage re-read) and
the memory the arrays hold."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

import numpy as np

from scheduler_ext.engine.usage_table import UsageTable

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.engine.index import CapacityIndex
    from scheduler_ext.placement.model import ProviderRecord


def replace_usages(ix: "CapacityIndex", table: UsageTable,
                   keep: Iterable[str] = ()) -> None:
    """Set every provider's usage from ``table`` (``UsageTable.grouped``);
    what is not listed is unused, except the providers ``keep``, which keep
    the usage they hold. O(providers) in numpy per class. The caller holds
    the index lock."""
    kept = [r for u in keep if (r := ix.row_of.get(u)) is not None]
    for rc, col in ix.columns.items():
        col.replace_used(*table.for_column(rc, col, kept))


def set_usages(ix: "CapacityIndex", usage: Mapping[str, Mapping[str, int]]) -> None:
    """Set the usage of the providers ``usage`` names (uuid -> class ->
    used; a class not listed: 0) in every class they hold an inventory of;
    unknown providers and classes without an inventory are skipped. The
    caller holds the index lock. O(providers x classes) in numpy."""
    known = [(r, n) for u, n in usage.items() if (r := ix.row_of.get(u)) is not None]
    if not known:
        return
    rows = np.array([r for r, _ in known], np.int64)
    for rc, col in ix.columns.items():
        col.set_used(rows, np.array([n.get(rc, 0) for _, n in known], np.int64))


def refresh_usage(ix: "CapacityIndex", row: int, rec: "ProviderRecord") -> bool | None:
    """Take ``rec``'s usages into ``row``, whose inventory is unchanged:
    whether any differed; None (nothing written) when ``rec`` holds a class
    the row has no inventory of (re-index the row). The caller holds the
    index lock."""
    deltas = []
    for rc in rec.inventories:
        col = ix.columns.get(rc)
        p = col.pos(row) if col is not None else -1
        if col is None or p < 0 or col.total[p] == 0:
            return None
        deltas.append((col, int(rec.usages.get(rc, 0)) - int(col.used[p])))
    for col, delta in deltas:
        if delta:
            col.add_used(row, delta)
    return any(delta for _, delta in deltas)


def memory(ix: "CapacityIndex") -> dict[str, float]:
    """Bytes held in numpy arrays, and the per-provider-per-class figure
    (column bytes / (providers x classes))."""
    cols = sum(c.nbytes for c in ix.columns.values())
    rows = sum(a.nbytes for a in (ix.generations, ix.alive, ix.setups,
                                  ix.key_hi, ix.key_lo))
    per = cols / max(1, ix.n_rows * max(1, len(ix.columns)))
    return {"columns": cols, "rows": rows, "traits": ix.traits.nbytes,
            "aggregates": ix.aggregates.nbytes,
            "total": cols + rows + ix.traits.nbytes + ix.aggregates.nbytes,
            "bytes_per_provider_per_class": per}
