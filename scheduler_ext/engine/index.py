"""``CapacityIndex``: placement's allocation-candidate answer, with numpy.

Layout (``n`` provider rows, each provider keeps its row for life):

* per resource class one ``Column`` (``columns.py``): contiguous arrays of
  total, reserved, min/max/step (int32), allocation ratio (float64), used
  and free (int64) -- never a providers x classes matrix;
* per row: uuid, generation, a 128-bit uuid key (two uint64, the uuid
  string order, for tie-breaks), trait bitsets and aggregate entries
  (``membership.py``); the sharing providers (trait
  ``MISC_SHARES_VIA_AGGREGATE``) are a small row set kept alongside.

The index is a cache of placement: a stale row costs the caller a retry of
its claim, nothing more. ``refresh_provider`` updates one row by generation,
``apply`` adds or removes a claim's usage; both cost O(what they touch).

Semantics follow ``shared/placement-semantics.md`` section 2 for a flat
fleet (every provider a root) and one unsuffixed request group; see
``CandidateRequest``. A query against a fleet holding nested (child)
providers raises ``Unsupported``.
"""

from __future__ import annotations

import contextlib
import random
import threading
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from scheduler_ext.engine import candidates as cand
from scheduler_ext.engine.columnar import ColumnarFleet
from scheduler_ext.engine.columns import Column, summary_capacity
from scheduler_ext.engine.fit import Choice, Fit
from scheduler_ext.engine.membership import AggregateSets, TraitBits
from scheduler_ext.engine.request import CandidateRequest
from scheduler_ext.engine.solver import Solver
from scheduler_ext.placement.model import SHARING_TRAIT
from scheduler_ext.engine.weigh import Weigher
from scheduler_ext.placement import validation
from scheduler_ext.placement.model import FleetSnapshot, ProviderRecord

_HEX = np.full(256, 0, np.uint64)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i
_NO_DASH = np.array([i for i in range(36) if i not in (8, 13, 18, 23)])
_SHIFTS = np.arange(60, -4, -4, dtype=np.uint64)

#: Allocations accepted by ``apply`` and ``released``: ``{rp: {rc: n}}``,
#: or placement's body shapes ``{rp: {"resources": {rc: n}}}`` and
#: ``{"allocations": {...}}``, or a list of any of these.
AllocationsLike = Any


def uuid_keys(uuids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(high, low) 64-bit halves of each canonical uuid: comparing
    ``(high, low)`` orders rows as their lower-case uuid strings."""
    if not len(uuids):
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    raw = np.frombuffer("".join(uuids).encode("ascii"), np.uint8)
    nib = _HEX[raw.reshape(len(uuids), 36)[:, _NO_DASH]]
    hi = np.bitwise_or.reduce(nib[:, :16] << _SHIFTS, axis=1)
    lo = np.bitwise_or.reduce(nib[:, 16:] << _SHIFTS, axis=1)
    return hi, lo


def allocation_list(value: AllocationsLike, field: str) -> list[dict[str, dict[str, int]]]:
    """Normalize ``AllocationsLike`` into validated ``{rp: {rc: n}}`` dicts."""
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


class CapacityIndex(Solver):
    """Vectorized allocation candidates over a snapshot of placement.

    Thread-safe (one lock). Build with ``from_snapshot`` or
    ``from_columnar``. ``single_precision_ratio=True`` mirrors a MySQL /
    MariaDB placement whose FLOAT column rounds allocation ratios to
    float32 in the SQL filter. Resource classes held by fewer than
    ``dense_threshold`` of the providers are stored sparse.
    """

    def __init__(self, *, single_precision_ratio: bool = False,
                 dense_threshold: float = 0.25):
        self.single_precision_ratio = single_precision_ratio
        self.dense_threshold = dense_threshold
        self._lock = threading.RLock()
        self._n = 0
        self._cap = 0
        self._uuids: list[str] = []
        self._row_of: dict[str, int] = {}
        self._gen = np.zeros(0, np.int64)
        self._alive = np.zeros(0, bool)
        self._hi = np.zeros(0, np.uint64)
        self._lo = np.zeros(0, np.uint64)
        self._tree: dict[int, tuple[str | None, str]] = {}  # nested rows
        self._cols: dict[str, Column] = {}
        self._traits = TraitBits()
        self._aggs = AggregateSets()
        self._sharing: set[int] = set()
        self._sh_cache: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    # ------------------------------------------------------------ building
    @classmethod
    def from_snapshot(cls, snapshot: FleetSnapshot, **kwargs: Any) -> "CapacityIndex":
        """Index every provider of ``snapshot`` (``client.snapshot()``)."""
        return cls.from_columnar(ColumnarFleet.from_snapshot(snapshot), **kwargs)

    @classmethod
    def from_columnar(cls, fleet: ColumnarFleet, **kwargs: Any) -> "CapacityIndex":
        """Index a ``ColumnarFleet`` (rows keep their order)."""
        idx = cls(**kwargs)
        n = len(fleet)
        idx._reserve(n, exact=True)
        idx._n = n
        idx._uuids = [validation.uuid(u, "uuid") if len(u) != 36 or u.lower() != u
                      else u for u in fleet.uuids]
        idx._row_of = {u: i for i, u in enumerate(idx._uuids)}
        if len(idx._row_of) != n:
            raise validation.bad("uuids", "duplicates", "provider uuids must be distinct")
        idx._gen[:n] = fleet.generations
        idx._alive[:n] = True
        idx._hi[:n], idx._lo[:n] = uuid_keys(idx._uuids)
        for rc, ic in fleet.inventories.items():
            validation.resource_class(rc)
            dense = len(ic.rows) >= idx.dense_threshold * n
            col = Column(rc, idx._cap, sparse=not dense,
                         single_precision=idx.single_precision_ratio)
            col.load(ic.rows, ic.total, ic.reserved, ic.min_unit, ic.max_unit,
                     ic.step_size, ic.allocation_ratio, ic.used)
            idx._cols[rc] = col
        idx._traits.load(fleet.trait_set_of, fleet.trait_sets)
        idx._aggs.load(fleet.aggregate_set_of,
                       [frozenset(a.lower() for a in s) for s in fleet.aggregate_sets])
        idx._sharing = set(np.flatnonzero(
            idx._traits.any_of([SHARING_TRAIT], n)).tolist())
        if fleet.parents is not None:
            for row, parent in enumerate(fleet.parents):
                if parent:
                    idx._tree[row] = (parent, fleet.roots[row])
        return idx

    def _reserve(self, size: int, exact: bool = False) -> None:
        if size <= self._cap:
            return
        cap = size if exact else max(size, 2 * self._cap, 64)

        def grow(a: np.ndarray) -> np.ndarray:
            new = np.zeros(cap, a.dtype)
            new[:len(a)] = a
            return new

        self._gen, self._alive = grow(self._gen), grow(self._alive)
        self._hi, self._lo = grow(self._hi), grow(self._lo)
        for col in self._cols.values():
            col.grow(cap)
        self._traits.grow(cap)
        self._aggs.grow(cap)
        self._cap = cap

    # ---------------------------------------------------------- inspection
    def __len__(self) -> int:
        """Live providers."""
        return int(self._alive[:self._n].sum())

    @property
    def resource_classes(self) -> list[str]:
        return sorted(self._cols)

    def generation(self, rp_uuid: str) -> int | None:
        """The generation last indexed for ``rp_uuid`` (None if unknown)."""
        row = self._row_of.get(rp_uuid)
        return None if row is None or not self._alive[row] else int(self._gen[row])

    def usage(self, rp_uuid: str) -> dict[str, int]:
        """Indexed usage per class held by ``rp_uuid`` (units)."""
        with self._lock:
            row = self._row_of.get(rp_uuid)
            if row is None or not self._alive[row]:
                return {}
            return {rc: s[1] for rc, col in self._cols.items()
                    if (s := col.summary(row)) is not None}

    def memory(self) -> dict[str, float]:
        """Bytes held in numpy arrays, and the per-provider-per-class figure
        (column bytes / (providers x classes))."""
        cols = sum(c.nbytes for c in self._cols.values())
        rows = sum(a.nbytes for a in (self._gen, self._alive, self._hi, self._lo))
        per = cols / max(1, self._n * max(1, len(self._cols)))
        return {"columns": cols, "rows": rows, "traits": self._traits.nbytes,
                "aggregates": self._aggs.nbytes,
                "total": cols + rows + self._traits.nbytes + self._aggs.nbytes,
                "bytes_per_provider_per_class": per}

    # ------------------------------------------------------------- updates
    def apply(self, allocs: AllocationsLike, sign: int = 1) -> list[tuple[str, str]]:
        """Add (``sign=1``, a claim) or remove (``sign=-1``, a release) usage.

        O(entries). Returns the (provider, class) pairs the index does not
        hold (a stale cache: refresh those providers).
        """
        if sign not in (1, -1):
            raise validation.bad("sign", sign, "must be 1 or -1")
        lists = allocation_list(allocs, "allocations")
        missing = []
        with self._lock:
            for allocs_ in lists:
                for rp, res in allocs_.items():
                    row = self._row_of.get(rp)
                    for rc, n in res.items():
                        col = self._cols.get(rc)
                        if row is None or col is None or not col.add_used(row, sign * n):
                            missing.append((rp, rc))
        return missing

    def replace_usages(self, entries: Iterable[tuple[str, str, int]]) -> None:
        """Set every provider's usage from ``(uuid, class, used)`` rows
        (placement's usage aggregate); what is not listed is unused.
        Unknown providers and classes are ignored. O(rows + providers)."""
        by_rc: dict[str, tuple[list[int], list[int]]] = {}
        with self._lock:
            row_of = self._row_of
            for u, rc, used in entries:
                row = row_of.get(u)
                if row is not None:
                    rows, vals = by_rc.setdefault(rc, ([], []))
                    rows.append(row)
                    vals.append(used)
            for rc, col in self._cols.items():
                rows, vals = by_rc.get(rc, ([], []))
                col.replace_used(np.array(rows, np.int64), np.array(vals, np.int64))

    def refresh_provider(self, record: ProviderRecord) -> bool:
        """Re-index one provider if its generation changed (or it is new:
        it is appended). Returns whether anything was written. O(classes +
        traits + aggregates of the provider).

        Placement's ``DELETE /allocations/{consumer}`` frees usage without
        bumping the provider generation, so at an unchanged generation the
        record's usages are still compared (and taken when they differ).
        """
        if not isinstance(record, ProviderRecord):
            raise validation.bad("record", record, "must be a ProviderRecord")
        with self._lock:
            uuid = record.provider.uuid
            row = self._row_of.get(uuid)
            if row is not None and self._alive[row] \
                    and self._gen[row] == record.provider.generation:
                return self._refresh_usage(row, record)
            if row is None:
                uuid = validation.uuid(uuid, "uuid")
                row = self._append(uuid)
            self._write(row, record)
            return True

    def _refresh_usage(self, row: int, rec: ProviderRecord) -> bool:
        changed = False
        for rc in rec.inventories:
            col = self._cols.get(rc)
            held = col.summary(row) if col is not None else None
            if held is None:  # inventory differs at the same generation
                self._write(row, rec)
                return True
            want = int(rec.usages.get(rc, 0))
            if held[1] != want:
                col.add_used(row, want - held[1])
                changed = True
        return changed

    def remove_provider(self, rp_uuid: str) -> bool:
        """Forget a deleted provider (its row stays, empty). True if it was live."""
        with self._lock:
            row = self._row_of.get(rp_uuid)
            if row is None or not self._alive[row]:
                return False
            for col in self._cols.values():
                col.set(row, None, 0)
            self._traits.set_row(row, ())
            self._aggs.set_row(row, ())
            if row in self._sharing:
                self._sharing.discard(row)
                self._sh_cache = None
            self._tree.pop(row, None)
            self._alive[row] = False
            return True

    def sync(self, snapshot: FleetSnapshot) -> tuple[int, int]:
        """Refresh every record by generation and remove providers the
        snapshot lacks. Returns (rows written, rows removed)."""
        with self._lock:
            changed = sum(self.refresh_provider(r) for r in snapshot.providers)
            seen = {r.provider.uuid for r in snapshot.providers}
            gone = [u for u, row in self._row_of.items()
                    if self._alive[row] and u not in seen]
            for u in gone:
                self.remove_provider(u)
            return changed, len(gone)

    def _append(self, uuid: str) -> int:
        row = self._n
        self._reserve(row + 1)
        self._n += 1
        self._uuids.append(uuid)
        self._row_of[uuid] = row
        hi, lo = uuid_keys([uuid])
        self._hi[row], self._lo[row] = hi[0], lo[0]
        return row

    def _write(self, row: int, rec: ProviderRecord) -> None:
        invs = rec.inventories
        for rc in invs:
            if rc not in self._cols:
                validation.resource_class(rc)
                self._cols[rc] = Column(rc, self._cap, sparse=True,
                                        single_precision=self.single_precision_ratio)
        for rc, col in self._cols.items():
            inv = invs.get(rc)
            if inv is None and col.pos(row) < 0:
                continue
            col.set(row, inv, int(rec.usages.get(rc, 0)))
            if col.sparse and col.count > self.dense_threshold * self._n:
                col.densify(self._cap)
        self._traits.set_row(row, rec.traits)
        was = row in self._sharing
        now = SHARING_TRAIT in rec.traits
        changed = self._aggs.set_row(row, (a.lower() for a in rec.aggregates))
        if now:
            self._sharing.add(row)
        else:
            self._sharing.discard(row)
        if was != now or (now and changed):
            self._sh_cache = None
        parent = rec.provider.parent_provider_uuid
        if parent:
            self._tree[row] = (parent, rec.provider.root_provider_uuid)
        else:
            self._tree.pop(row, None)
        self._gen[row] = rec.provider.generation
        self._alive[row] = True

    # ----------------------------------------------------------- released
    @contextlib.contextmanager
    def _released(self, released: AllocationsLike) -> Iterator[dict[tuple[int, str], int]]:
        """Subtract ``released`` from usage for the block, then restore.
        Providers or classes the index lacks are ignored (nothing to free).
        Yields ``{(row, rc): units}`` of what was subtracted."""
        overlay: dict[tuple[int, str], int] = {}
        for allocs in allocation_list(released, "released"):
            for rp, res in allocs.items():
                row = self._row_of.get(rp)
                for rc, n in res.items():
                    col = self._cols.get(rc)
                    if row is None or col is None or col.summary(row) is None:
                        continue
                    overlay[(row, rc)] = overlay.get((row, rc), 0) + n
        done: list[tuple[int, str, int]] = []
        try:
            for (row, rc), n in overlay.items():
                self._cols[rc].add_used(row, -n)
                done.append((row, rc, n))
            yield overlay
        finally:
            for row, rc, n in done:
                self._cols[rc].add_used(row, n)

    def fit(self, request: CandidateRequest, released: AllocationsLike = None, *,
            include_sharing_roots: bool = False) -> Fit:
        """The scheduler's fast path: every root that fits ``request`` with
        one allocation each, as arrays (no JSON built).

        ``released`` (``{rp: {rc: n}}`` or a list) is treated as free, e.g.
        the old flavor of a moving server; placement is not touched.
        Sharing providers are not returned as roots unless
        ``include_sharing_roots`` (they are no compute hosts).
        ``request.limit``/``randomize`` do not apply here (see ``Fit.best``).
        """
        with self._lock, self._released(released) as overlay:
            ev = self._evaluate(request)
            if not include_sharing_roots and self._sharing:
                ev.pre = ev.pre.copy()
                ev.pre[self._sharing_rows()] = False
            rows, sources = self._solve(ev)
            return Fit(self, request, rows, sources, dict(overlay))

    def select(self, request: CandidateRequest, released: AllocationsLike = None, *,
               weigher: Weigher | None = None, k: int = 1, host_subset_size: int = 1,
               rng: random.Random | int | None = None,
               include_sharing_roots: bool = False) -> list[Choice]:
        """``fit`` then ``Fit.best``: the ``k`` best roots, weighed, each
        with one allocation request (see ``Fit.best``)."""
        return self.fit(request, released,
                        include_sharing_roots=include_sharing_roots).best(
            k, weigher=weigher, host_subset_size=host_subset_size, rng=rng)

    def candidates(self, request: CandidateRequest, released: AllocationsLike = None,
                   *, rng: random.Random | int | None = None) -> dict:
        """``GET /allocation_candidates`` (microversion 1.39) for ``request``:
        ``{"allocation_requests": [...], "provider_summaries": {...}}``.

        Every candidate placement would return (as a set; the order is
        roots by uuid, then local before sharing suppliers), ``limit``
        keeping the first N or, with ``randomize``, a sample drawn with
        ``rng`` (a ``random.Random`` or a seed). O(candidates) in Python:
        a scheduler wants ``fit``/``select``.
        """
        with self._lock, self._released(released):
            ev = self._evaluate(request)
            return cand.Enumerator(self, ev).placement_answer(rng)

    # ------------------------------------------------------------ summaries
    def provider_summaries(self, rows: Sequence[int] | np.ndarray,
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
            parent, root = self._tree.get(r, (None, self._uuids[r]))
            res: dict[str, dict] = {}
            res_of.append(res)
            out[self._uuids[r]] = {
                "resources": res, "traits": sorted(self._traits.names[r]),
                "parent_provider_uuid": parent, "root_provider_uuid": root}
        for rc in sorted(self._cols):
            col = self._cols[rc]
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
