"""Inventory and usage of one resource class, one array per field.

A ``Column`` holds, for the providers with an inventory of one class,
contiguous arrays of ``total``, ``reserved``, ``min_unit``, ``max_unit``,
``step_size`` (int32, placement's column types), ``allocation_ratio``
(float64), ``used`` and ``free`` (int64). It is *dense* (slot = provider
row, absent rows neutral) or *sparse* (sorted ``rows`` array, for classes
few providers have). 44 bytes per slot (+4 for ``rows`` when sparse).

Invariants:

* ``free = read_capacity - used`` where ``read_capacity`` is placement's
  read-path capacity ``floor(float64((total - reserved) * ratio))`` (and,
  with ``single_precision``, also at most the product computed with the
  ratio rounded to float32, as MySQL's FLOAT column makes the SQL filter
  see it). A request of ``amount`` fits iff ``free >= amount`` and
  ``min_unit <= amount <= max_unit`` and ``amount % step_size == 0``.
* An absent slot has ``total == 0`` and ``free == 0``, so nothing fits it
  (every amount is >= 1), and neutral ``min/max/step`` so the stats below
  stay tight.
* ``max_min`` >= every present ``min_unit``, ``min_max`` <= every present
  ``max_unit`` and ``steps`` is true if any present ``step_size != 1``:
  conservative bounds that let a query skip a comparison.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from scheduler_ext.placement import validation
from scheduler_ext.placement.model import MAX_INT, Inventory

_I32 = np.int32
_CLASS_NAME = re.compile(r"^[A-Z0-9_]+$")


def column_name(rc: Any) -> str:
    """``rc`` if it is a resource class name as placement stores one
    (``[A-Z0-9_]+``), else InvalidRequest. Placement is the truth about
    which classes exist: a standard class newer than the installed
    os-resource-classes is indexed like any other (queries are still
    checked against os-resource-classes)."""
    if not isinstance(rc, str) or not _CLASS_NAME.match(rc):
        raise validation.bad("resource_class", rc, "resource class names are [A-Z0-9_]+")
    return rc
_FIELDS_I32 = ("total", "reserved", "min_unit", "max_unit", "step_size")


def read_capacity(total: np.ndarray, reserved: np.ndarray, ratio: np.ndarray,
                  single_precision: bool = False) -> np.ndarray:
    """Placement's read-path capacity as int64 (see module docstring)."""
    base = total.astype(np.float64) - reserved
    cap = np.floor(base * ratio)
    if single_precision:
        cap = np.minimum(cap, np.floor(base * ratio.astype(np.float32).astype(np.float64)))
    return cap.astype(np.int64)


def as_slice(index: np.ndarray) -> np.ndarray | slice:
    """``index`` (ascending int64 positions) as the equal slice when it is
    an arithmetic progression (a view then replaces a gather), else itself."""
    if len(index) < 2:
        return index
    step = int(index[1] - index[0])
    if step <= 0 or not (np.diff(index) == step).all():
        return index
    return slice(int(index[0]), int(index[-1]) + 1, step)


def summary_capacity(total: np.ndarray, reserved: np.ndarray,
                     ratio: np.ndarray) -> np.ndarray:
    """``int((total - reserved) * ratio)``: what provider summaries show."""
    return np.trunc((total.astype(np.float64) - reserved) * ratio).astype(np.int64)


class Column:
    """One resource class's inventory/usage arrays (see module docstring)."""

    def __init__(self, name: str, size: int, *, sparse: bool,
                 single_precision: bool = False):
        self.name = name
        self.sparse = sparse
        self.single_precision = single_precision
        #: sparse only: the provider row of each slot, ascending (empty
        #: when dense)
        self.rows = np.zeros(0, np.int64)
        # sparse only: row -> slot (-1 none) for gathers over many rows,
        # rebuilt lazily after ``rows`` changes (see ``positions``)
        self._slot_of: np.ndarray | None = None
        self.size = size  # rows the index has room for
        n = 0 if sparse else size
        self.total = np.zeros(n, _I32)
        self.reserved = np.zeros(n, _I32)
        self.min_unit = np.ones(n, _I32)
        self.max_unit = np.full(n, MAX_INT, _I32)
        self.step_size = np.ones(n, _I32)
        self.ratio = np.ones(n, np.float64)
        self.used = np.zeros(n, np.int64)
        self.free = np.zeros(n, np.int64)
        self.max_min = 1
        self.min_max = MAX_INT
        self.steps = False
        self.count = 0  # present slots
        #: bumped whenever a row gains or loses this class
        self.version = 0

    # ------------------------------------------------------------ layout
    def _arrays(self) -> tuple[str, ...]:
        return _FIELDS_I32 + ("ratio", "used", "free")

    def grow(self, size: int) -> None:
        """Make room for rows ``< size`` (dense: absent, neutral slots;
        sparse: the row -> slot map, when kept)."""
        self.size = max(self.size, size)
        if self.sparse:
            self._slot_of = None
            return
        if size <= len(self.total):
            return
        fill = {"min_unit": 1, "max_unit": MAX_INT, "step_size": 1, "ratio": 1.0}
        for name in self._arrays():
            old = getattr(self, name)
            new = np.full(size, fill.get(name, 0), old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    @property
    def nbytes(self) -> int:
        total = sum(getattr(self, a).nbytes for a in self._arrays())
        return total + (self.rows.nbytes if self.sparse else 0)

    @property
    def slots(self) -> int:
        return len(self.total)

    def pos(self, row: int) -> int:
        """Slot of ``row``, or -1 when the column has no slot for it."""
        if not self.sparse:
            return row if row < len(self.total) else -1
        i = int(np.searchsorted(self.rows, row))
        return i if i < len(self.rows) and self.rows[i] == row else -1

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """Slots of ``rows`` (an integer array; rows of the index), -1 where
        absent. A sparse column asked for many rows keeps a row -> slot map
        (8 bytes per row of the index) instead of a binary search; it is
        int64 because numpy gathers with an int32 index several times
        slower, and every caller gathers with the answer."""
        rows = np.asarray(rows, np.int64)
        if not self.sparse:
            return np.where(rows < len(self.total), rows, -1)
        if len(rows) > 256 and len(self.rows) > 256:
            if self._slot_of is None or len(self._slot_of) < self.size:
                self._slot_of = np.full(max(self.size, int(self.rows[-1]) + 1), -1, np.int64)
                self._slot_of[self.rows] = np.arange(len(self.rows))
            return self._slot_of[rows]
        i = np.searchsorted(self.rows, rows)
        ok = i < len(self.rows)
        ok[ok] = self.rows[i[ok]] == rows[ok]
        return np.where(ok, i, -1)

    def _insert(self, row: int) -> int:
        i = int(np.searchsorted(self.rows, row))
        self.rows = np.insert(self.rows, i, row)
        self._slot_of = None
        fill = {"min_unit": 1, "max_unit": MAX_INT, "step_size": 1, "ratio": 1.0}
        for name in self._arrays():
            setattr(self, name, np.insert(getattr(self, name), i,
                                          fill.get(name, 0)))
        return i

    # -------------------------------------------------------------- bulk
    def load(self, rows: np.ndarray, total, reserved, min_unit, max_unit,
             step_size, ratio, used) -> None:
        """Fill slots of ``rows`` (distinct) from parallel arrays."""
        rows = np.asarray(rows, np.int64)
        order: np.ndarray | slice
        if self.sparse:
            order = np.argsort(rows, kind="stable")
            self.rows = rows[order]
            self._slot_of = None
            n = len(rows)
            for name in self._arrays():
                setattr(self, name, np.zeros(n, getattr(self, name).dtype))
            slots = np.arange(n)
        else:
            order = slice(None)
            slots = rows
        take = lambda a, dt: np.asarray(a, dt)[order]  # noqa: E731
        self.total[slots] = take(total, _I32)
        self.reserved[slots] = take(reserved, _I32)
        self.min_unit[slots] = take(min_unit, _I32)
        self.max_unit[slots] = take(max_unit, _I32)
        self.step_size[slots] = take(step_size, _I32)
        self.ratio[slots] = take(ratio, np.float64)
        self.used[slots] = take(used, np.int64)
        self.free[slots] = read_capacity(
            self.total[slots], self.reserved[slots], self.ratio[slots],
            self.single_precision) - self.used[slots]
        self.count = len(rows)
        self.version += 1
        self.restat()

    def restat(self) -> None:
        """Recompute the tight ``max_min``/``min_max``/``steps`` bounds."""
        present = self.total > 0
        if present.any():
            self.max_min = int(self.min_unit[present].max())
            self.min_max = int(self.max_unit[present].min())
            self.steps = bool((self.step_size[present] != 1).any())
        else:
            self.max_min, self.min_max, self.steps = 1, MAX_INT, False
        self.count = int(present.sum())

    # ------------------------------------------------------- per provider
    def set(self, row: int, inv: Inventory | None, used: int) -> None:
        """Set ``row``'s inventory (``None``: none of this class) and usage."""
        p = self.pos(row)
        if inv is None:
            if p < 0:
                return
            if self.total[p] > 0:
                self.count -= 1
                self.version += 1
            self.total[p] = self.reserved[p] = 0
            self.min_unit[p] = self.step_size[p] = 1
            self.max_unit[p] = MAX_INT
            self.ratio[p] = 1.0
            self.used[p] = self.free[p] = 0
            return
        if p < 0:
            p = self._insert(row)
        if self.total[p] == 0:
            self.count += 1
            self.version += 1
        self.total[p], self.reserved[p] = inv.total, inv.reserved
        self.min_unit[p], self.max_unit[p] = inv.min_unit, inv.max_unit
        self.step_size[p], self.ratio[p] = inv.step_size, inv.allocation_ratio
        self.used[p] = used
        self.free[p] = int(read_capacity(
            self.total[p:p + 1], self.reserved[p:p + 1], self.ratio[p:p + 1],
            self.single_precision)[0]) - used
        self.max_min = max(self.max_min, inv.min_unit)
        self.min_max = min(self.min_max, inv.max_unit)
        self.steps = self.steps or inv.step_size != 1

    def holds(self, row: int) -> bool:
        """``row`` has an inventory of this class."""
        p = self.pos(row)
        return p >= 0 and self.total[p] != 0

    def add_used(self, row: int, delta: int) -> bool:
        """Add ``delta`` to ``row``'s usage; False if it holds no inventory."""
        p = self.pos(row)
        if p < 0 or self.total[p] == 0:
            return False
        self.used[p] += delta
        self.free[p] -= delta
        return True

    def set_used(self, rows: np.ndarray, used: np.ndarray) -> None:
        """Usage of some provider ``rows`` (distinct): ``used[i]`` at
        ``rows[i]``; rows without a slot or an inventory here are left
        alone. O(len(rows)) in numpy."""
        p = self.positions(rows)
        p, used = p[p >= 0], used[p >= 0]
        ok = self.total[p] > 0
        p, used = p[ok], used[ok]
        self.free[p] += self.used[p] - used
        self.used[p] = used

    def replace_used(self, rows: np.ndarray, used: np.ndarray) -> None:
        """Usage of every slot at once: ``used[i]`` at provider ``rows[i]``,
        0 elsewhere (rows without a slot are ignored). O(slots) in numpy."""
        new = np.zeros(len(self.used), np.int64)
        p = self.positions(rows)
        ok = p >= 0
        new[p[ok]] = np.asarray(used, np.int64)[ok]
        new[self.total == 0] = 0
        self.free += self.used - new
        self.used = new

    # ------------------------------------------------------------ queries
    def fit_slots(self, amount: int) -> np.ndarray:
        """Bool per slot: does ``amount`` fit there (module docstring rule)."""
        if amount > MAX_INT:
            return np.zeros(len(self.total), bool)
        ok = self.free >= amount
        if amount < self.max_min:
            ok &= self.min_unit <= amount
        if amount > self.min_max:
            ok &= self.max_unit >= amount
        if self.steps:
            ok &= (amount % self.step_size) == 0
        return ok

    def fits_at(self, slots: np.ndarray | slice, amount: int, present: bool = False
                ) -> np.ndarray:
        """Bool per entry of ``slots`` (-1: no slot, never fits; none is -1
        when ``present``, and ``slots`` may then be a slice): does ``amount``
        fit there (module docstring rule)."""
        p: Any = slots
        if not present:
            assert isinstance(slots, np.ndarray)
            p = np.maximum(slots, 0)
        free = self.free[p]
        if amount > MAX_INT:
            return np.zeros(len(free), bool)
        ok = free >= amount
        if not present:
            ok &= p == slots
        if amount < self.max_min:
            ok &= self.min_unit[p] <= amount
        if amount > self.min_max:
            ok &= self.max_unit[p] >= amount
        if self.steps:
            ok &= (amount % self.step_size[p]) == 0
        return ok

    def fit_mask(self, amount: int, n: int) -> np.ndarray:
        """Bool per provider row ``< n``: does ``amount`` fit there."""
        ok = self.fit_slots(amount)
        if not self.sparse:
            return ok[:n]
        mask = np.zeros(n, bool)
        mask[self.rows[ok]] = True
        return mask

    def gather(self, field: str, rows: np.ndarray, default: int = 0,
               present: bool = False) -> np.ndarray:
        """``field`` at provider ``rows`` (``default`` where absent; none is
        when ``present``)."""
        arr = getattr(self, field)
        if not self.sparse:
            return arr[rows]
        p = self.positions(rows)
        if present or not len(p) or p.min() >= 0:
            return arr[p]
        out = np.full(len(p), default, arr.dtype)
        out[p >= 0] = arr[p[p >= 0]]
        return out

    def summary(self, row: int) -> tuple[int, int] | None:
        """(capacity, used) as provider summaries show them, or None."""
        p = self.pos(row)
        if p < 0 or self.total[p] == 0:
            return None
        cap = summary_capacity(self.total[p:p + 1], self.reserved[p:p + 1],
                               self.ratio[p:p + 1])[0]
        return int(cap), int(self.used[p])

    def densify(self, size: int) -> None:
        """Turn a sparse column dense, with room for rows ``< size``."""
        if not self.sparse:
            return
        fill = {"min_unit": 1, "max_unit": MAX_INT, "step_size": 1, "ratio": 1.0}
        rows = self.rows
        for name in self._arrays():
            old = getattr(self, name)
            new = np.full(size, fill.get(name, 0), old.dtype)
            new[rows] = old
            setattr(self, name, new)
        self.rows = np.zeros(0, np.int64)
        self._slot_of = None
        self.sparse = False
        self.version += 1   # every slot moved
