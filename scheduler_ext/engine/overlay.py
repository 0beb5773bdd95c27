"""Usage treated as free for one query: a moving server's old allocations
(``released=``), subtracted from the index's columns for the duration of
a block and restored afterwards (the caller holds the index lock)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator

from scheduler_ext.placement import allocations

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.engine.index import CapacityIndex


@contextlib.contextmanager
def released(ix: "CapacityIndex", allocs: Any) -> Iterator[dict[tuple[int, str], int]]:
    """Subtract ``allocs`` (``{rp: {rc: n}}``, a body shape or a list; see
    ``allocations.normalized_list``) from usage for the block, then
    restore it. Providers (any provider of a tree: a root or a child) or
    classes the index lacks are ignored (nothing to free). Yields
    ``{(row, rc): units}`` of what was subtracted."""
    overlay: dict[tuple[int, str], int] = {}
    for allocs_ in allocations.normalized_list(allocs, "released"):
        for rp, res in allocs_.items():
            row = ix.row_of.get(rp)
            for rc, n in res.items():
                col = ix.columns.get(rc)
                if row is None or col is None or not col.holds(row):
                    continue
                overlay[(row, rc)] = overlay.get((row, rc), 0) + n
    done: list[tuple[int, str, int]] = []
    try:
        for (row, rc), n in overlay.items():
            ix.columns[rc].add_used(row, -n)
            done.append((row, rc, n))
        yield overlay
    finally:
        for row, rc, n in done:
            ix.columns[rc].add_used(row, n)
