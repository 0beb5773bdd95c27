"""Placement's ``provider_summaries`` (microversion 1.39 shape) from the
index's columns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from scheduler_ext.engine.columns import summary_capacity

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.engine.index import CapacityIndex


def provider_summaries(index: "CapacityIndex", rows: Sequence[int] | np.ndarray,
                       overlay: Mapping[tuple[int, str], int] | None = None
                       ) -> dict[str, dict]:
    """Placement's ``provider_summaries`` (1.39 shape) for ``rows``:
    capacity ``int((total - reserved) * ratio)`` and used for every
    class the provider holds, traits, parent and root uuid. ``overlay``
    (``{(row, rc): units}``) is subtracted from used (released usage)."""
    rows = np.unique(np.asarray(rows, np.int64))
    out: dict[str, dict] = {}
    res_of: list[dict] = []
    for r in rows.tolist():
        parent, root = index.tree.get(r, (None, index.uuids[r]))
        res: dict[str, dict] = {}
        res_of.append(res)
        out[index.uuids[r]] = {
            "resources": res, "traits": sorted(index.traits.names[r]),
            "parent_provider_uuid": parent, "root_provider_uuid": root}
    for rc in sorted(index.columns):
        col = index.columns[rc]
        total = col.gather("total", rows)
        present = np.flatnonzero(total > 0)
        if not len(present):
            continue
        sel = rows[present]
        cap = summary_capacity(total[present], col.gather("reserved", sel),
                               col.gather("ratio", sel, 1))
        used = col.gather("used", sel)
        for i, c, u, r in zip(present.tolist(), cap.tolist(), used.tolist(),
                              sel.tolist()):
            if overlay:
                u -= overlay.get((r, rc), 0)
            res_of[i][rc] = {"capacity": c, "used": u}
    return out
