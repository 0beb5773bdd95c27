"""A usage table (placement's per-provider, per-class usage aggregate)
grouped by resource class into index rows, ready for
``Column.replace_used``."""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from scheduler_ext.engine.columns import Column


class UsageTable:
    """``rows[rc]``/``used[rc]``: parallel lists of index rows and units."""

    def __init__(self) -> None:
        self.by_class: dict[str, tuple[list[int], list[int]]] = {}

    @classmethod
    def grouped(cls, entries: Iterable[tuple[str, str, int]],
                row_of: Mapping[str, int]) -> "UsageTable":
        """Group ``(uuid, class, used)`` rows; unknown providers are
        dropped. O(entries) in Python."""
        table = cls()
        for u, rc, used in entries:
            row = row_of.get(u)
            if row is not None:
                rows, vals = table.by_class.setdefault(rc, ([], []))
                rows.append(row)
                vals.append(used)
        return table

    def for_column(self, rc: str, col: Column, kept: list[int]
                   ) -> tuple[np.ndarray, np.ndarray]:
        """(rows, used) to write into ``col``: this table's, except that the
        rows ``kept`` keep the usage ``col`` holds now."""
        rows, vals = self.by_class.get(rc, ([], []))
        held = [(r, s[1]) for r in kept if (s := col.summary(r)) is not None]
        if held:
            drop = {r for r, _ in held}
            pairs = [(r, v) for r, v in zip(rows, vals) if r not in drop] + held
            rows, vals = [r for r, _ in pairs], [v for _, v in pairs]
        return np.array(rows, np.int64), np.array(vals, np.int64)
