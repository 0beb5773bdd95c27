"""Whole-index operations on ``CapacityIndex`` rows: usage replaced from
placement's usage aggregate, and the memory the arrays hold."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.engine.index import CapacityIndex


def replace_usages(ix: "CapacityIndex", entries: Iterable[tuple[str, str, int]]) -> None:
    """Set every provider's usage from ``(uuid, class, used)`` rows; what is
    not listed is unused. Unknown providers and classes are ignored.
    O(rows + providers). The caller holds the index lock."""
    by_rc: dict[str, tuple[list[int], list[int]]] = {}
    row_of = ix.row_of
    for u, rc, used in entries:
        row = row_of.get(u)
        if row is not None:
            rows, vals = by_rc.setdefault(rc, ([], []))
            rows.append(row)
            vals.append(used)
    for rc, col in ix.columns.items():
        rows, vals = by_rc.get(rc, ([], []))
        col.replace_used(np.array(rows, np.int64), np.array(vals, np.int64))


def memory(ix: "CapacityIndex") -> dict[str, float]:
    """Bytes held in numpy arrays, and the per-provider-per-class figure
    (column bytes / (providers x classes))."""
    cols = sum(c.nbytes for c in ix.columns.values())
    rows = sum(a.nbytes for a in (ix.generations, ix.alive, ix.key_hi, ix.key_lo))
    per = cols / max(1, ix.n_rows * max(1, len(ix.columns)))
    return {"columns": cols, "rows": rows, "traits": ix.traits.nbytes,
            "aggregates": ix.aggregates.nbytes,
            "total": cols + rows + ix.traits.nbytes + ix.aggregates.nbytes,
            "bytes_per_provider_per_class": per}
