"""Trait and aggregate membership of provider rows.

``TraitBits``: one uint64 word array per 64 distinct trait names (bit
``i % 64`` of word ``i // 64`` set when the row has trait ``i``), plus the
row's interned frozenset of names for output. 8 bytes per row per 64 traits.

``AggregateSets``: a coordinate list of (row, aggregate id) entries, each
row's entries contiguous at ``start[row]:start[row] + count[row]``. A change
tombstones the old entries (aggregate id 0, never a real aggregate) and
appends the new ones, so an update costs O(aggregates of the row); the list
is compacted once tombstones outnumber live entries. Queries scan the
entries once with numpy (O(entries)).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

_EMPTY: frozenset = frozenset()


def _grow(arr: np.ndarray, size: int, fill=0) -> np.ndarray:
    if size <= len(arr):
        return arr
    new = np.full(max(size, 2 * len(arr), 16), fill, arr.dtype)
    new[:len(arr)] = arr
    return new


class TraitBits:
    """Trait bitsets of provider rows (see module docstring)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.words: list[np.ndarray] = []
        self.names: list[frozenset[str]] = []  # per row, interned
        self._intern: dict[frozenset[str], frozenset[str]] = {}
        self._size = 0
        #: per row the id of its trait set in ``sets`` (id 0: no traits)
        self.set_of_row = np.zeros(0, np.int32)
        self.sets: list[frozenset[str]] = [_EMPTY]
        self._set_id: dict[frozenset[str], int] = {_EMPTY: 0}
        #: bumped on every change of a row's traits
        self.version = 0

    def grow(self, size: int) -> None:
        """Make room for rows ``< size``."""
        self._size = max(self._size, size)
        self.words = [_grow(w, size) for w in self.words]
        self.set_of_row = _grow(self.set_of_row, size)
        if len(self.names) < size:
            self.names.extend([_EMPTY] * (size - len(self.names)))

    def set_id(self, names: frozenset[str]) -> int:
        i = self._set_id.get(names)
        if i is None:
            i = self._set_id[names] = len(self.sets)
            self.sets.append(names)
        return i

    def match(self, groups: Iterable[Iterable[str]] = (), forbidden: Iterable[str] = (),
              n: int | None = None, rows: np.ndarray | None = None) -> np.ndarray:
        """Bool per row ``< n`` (or per entry of ``rows``): it has a trait
        of every any-of group and none of ``forbidden``. One gather of
        trait-set ids; the distinct sets are tested in Python."""
        wanted = [frozenset(g) for g in groups]
        banned = frozenset(forbidden)
        ok = np.fromiter((all(names & g for g in wanted) and not names & banned
                          for names in self.sets), bool, count=len(self.sets))
        ids = self.set_of_row[:n] if rows is None else self.set_of_row[rows]
        return ok[ids]

    def _id(self, name: str) -> int:
        i = self.ids.get(name)
        if i is None:
            i = self.ids[name] = len(self.ids)
            if i // 64 >= len(self.words):
                cap = len(self.words[0]) if self.words else self._size
                self.words.append(np.zeros(cap, np.uint64))
        return i

    def intern(self, names: Iterable[str]) -> frozenset[str]:
        key = frozenset(names)
        return self._intern.setdefault(key, key)

    def load(self, set_of_row: np.ndarray, sets: list[frozenset[str]]) -> None:
        """Bulk: row ``r`` (``r < len(set_of_row)``) gets the traits
        ``sets[set_of_row[r]]``; one gather per word."""
        set_of_row = np.asarray(set_of_row, np.int64)
        interned = [self.intern(s) for s in sets]
        for names in interned:
            for t in sorted(names):
                self._id(t)
        n = len(set_of_row)
        for w, arr in enumerate(self.words):
            per_set = np.array([self._word_bits(s, create=False).get(w, 0)
                                for s in interned] or [0], np.uint64)
            arr[:n] = per_set[set_of_row] if len(interned) else 0
        names_arr = np.empty(len(interned), object)
        names_arr[:] = interned
        self.names[:n] = list(names_arr[set_of_row]) if len(interned) else [_EMPTY] * n
        ids = np.array([self.set_id(s) for s in interned] or [0], np.int32)
        self.set_of_row[:n] = ids[set_of_row] if len(interned) else 0
        self.version += 1

    def _word_bits(self, names: Iterable[str], create: bool = True) -> dict[int, int]:
        out: dict[int, int] = {}
        for t in names:
            i = self._id(t) if create else self.ids.get(t)
            if i is None:
                continue
            out[i // 64] = out.get(i // 64, 0) | (1 << (i % 64))
        return out

    def set_row(self, row: int, names: Iterable[str]) -> None:
        names = self.intern(names)
        bits = self._word_bits(names)
        for w, arr in enumerate(self.words):
            arr[row] = bits.get(w, 0)
        self.names[row] = names
        self.set_of_row[row] = self.set_id(names)
        self.version += 1

    # ------------------------------------------------------------ queries
    def any_of(self, names: Iterable[str], n: int) -> np.ndarray:
        """Bool per row ``< n``: has at least one of ``names``."""
        out = np.zeros(n, bool)
        for w, bits in self._word_bits(names, create=False).items():
            out |= (self.words[w][:n] & np.uint64(bits)) != 0
        return out

    def all_of(self, names: Iterable[str], n: int) -> np.ndarray:
        """Bool per row ``< n``: has every one of ``names``."""
        names = list(names)
        if any(t not in self.ids for t in names):
            return np.zeros(n, bool)
        out = np.ones(n, bool)
        for w, bits in self._word_bits(names, create=False).items():
            b = np.uint64(bits)
            out &= (self.words[w][:n] & b) == b
        return out

    def any_of_rows(self, names: Iterable[str], rows: np.ndarray) -> np.ndarray:
        """Bool per entry of ``rows``: has at least one of ``names``."""
        out = np.zeros(len(rows), bool)
        for w, bits in self._word_bits(names, create=False).items():
            out |= (self.words[w][rows] & np.uint64(bits)) != 0
        return out

    def group_masks(self, groups: tuple[frozenset[str], ...],
                    rows: np.ndarray) -> np.ndarray:
        """uint64 per entry of ``rows``: bit g set when the row meets
        any-of group ``g`` (at most 64 groups)."""
        out = np.zeros(len(rows), np.uint64)
        for g, group in enumerate(groups):
            out |= self.any_of_rows(group, rows).astype(np.uint64) << np.uint64(g)
        return out

    @property
    def nbytes(self) -> int:
        return sum(w.nbytes for w in self.words)


class AggregateSets:
    """Aggregate membership of provider rows (see module docstring)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.uuids: list[str] = [""]  # id 0: tombstone
        self.sets: list[frozenset[int]] = []  # per row, interned ids
        self._intern: dict[frozenset[int], frozenset[int]] = {}
        self.e_row = np.zeros(0, np.int32)
        self.e_agg = np.zeros(0, np.int32)
        self.e_len = 0
        self.dead = 0
        self.start = np.zeros(0, np.int64)
        self.count = np.zeros(0, np.int32)
        # per row: its aggregate id when it has exactly one, 0 when none,
        # -1 when several (most providers have one: a cheap direct gather)
        self.single = np.zeros(0, np.int32)
        #: bumped on every change of a row's aggregates
        self.version = 0

    def grow(self, size: int) -> None:
        self.start = _grow(self.start, size)
        self.count = _grow(self.count, size)
        self.single = _grow(self.single, size)
        if len(self.sets) < size:
            self.sets.extend([_EMPTY] * (size - len(self.sets)))

    def _id(self, agg: str) -> int:
        i = self.ids.get(agg)
        if i is None:
            i = self.ids[agg] = len(self.uuids)
            self.uuids.append(agg)
        return i

    def intern(self, aggs: Iterable[str]) -> frozenset[int]:
        key = frozenset(self._id(a) for a in aggs)
        return self._intern.setdefault(key, key)

    def load(self, set_of_row: np.ndarray, sets: list[frozenset[str]]) -> None:
        """Bulk: row ``r`` gets ``sets[set_of_row[r]]`` (rows are new)."""
        set_of_row = np.asarray(set_of_row, np.int64)
        ids = [self.intern(s) for s in sets]
        flat = [sorted(s) for s in ids]
        sizes = np.array([len(s) for s in flat] or [0], np.int64)
        offsets = np.zeros(len(sizes), np.int64)
        np.cumsum(sizes[:-1], out=offsets[1:])
        flat_all = np.array([a for s in flat for a in s] or [0], np.int32)
        n = len(set_of_row)
        cnt = sizes[set_of_row] if len(sets) else np.zeros(n, np.int64)
        starts = np.zeros(n, np.int64)
        np.cumsum(cnt[:-1], out=starts[1:])
        total = int(cnt.sum())
        self.e_row = np.repeat(np.arange(n, dtype=np.int32), cnt)
        within = np.arange(total, dtype=np.int64) - np.repeat(starts, cnt)
        self.e_agg = flat_all[offsets[set_of_row][self.e_row] + within] \
            if total else np.zeros(0, np.int32)
        self.e_len, self.dead = total, 0
        self.grow(n)
        self.start[:n] = starts
        self.count[:n] = cnt
        first = np.zeros(n, np.int32)
        has = cnt > 0
        first[has] = self.e_agg[starts[has]]
        self.single[:n] = np.where(cnt > 1, -1, first)
        names = np.empty(len(ids), object)
        names[:] = ids
        self.sets[:n] = list(names[set_of_row])
        self.version += 1

    def set_row(self, row: int, aggs: Iterable[str]) -> bool:
        """Replace ``row``'s aggregates; True if they changed."""
        ids = self.intern(aggs)
        if self.sets[row] == ids:
            return False
        s, c = int(self.start[row]), int(self.count[row])
        self.e_agg[s:s + c] = 0
        self.dead += c
        new = sorted(ids)
        need = self.e_len + len(new)
        self.e_row = _grow(self.e_row, need)
        self.e_agg = _grow(self.e_agg, need)
        self.e_row[self.e_len:need] = row
        self.e_agg[self.e_len:need] = new
        self.start[row], self.count[row] = self.e_len, len(new)
        self.single[row] = new[0] if len(new) == 1 else (0 if not new else -1)
        self.e_len = need
        self.sets[row] = ids
        self.version += 1
        if self.dead > 1024 and self.dead > self.e_len - self.dead:
            self.compact()
        return True

    def compact(self) -> None:
        """Drop tombstones (O(entries))."""
        live = self.e_agg[:self.e_len] != 0
        newpos = np.cumsum(live) - 1
        rows = np.flatnonzero(self.count > 0)
        self.start[rows] = newpos[self.start[rows]]
        self.e_row = self.e_row[:self.e_len][live].copy()
        self.e_agg = self.e_agg[:self.e_len][live].copy()
        self.e_len, self.dead = len(self.e_row), 0

    def entries_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in ``rows``, aggregate id) of the entries of ``rows``."""
        cnt = self.count[rows].astype(np.int64)
        total = int(cnt.sum())
        if not total:
            return np.zeros(0, np.int64), np.zeros(0, np.int32)
        which = np.repeat(np.arange(len(rows)), cnt)
        offset = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        return which, self.e_agg[self.start[rows][which] + offset]

    def entries(self) -> tuple[np.ndarray, np.ndarray]:
        """(row, aggregate id) of every entry (tombstones have id 0)."""
        return self.e_row[:self.e_len], self.e_agg[:self.e_len]

    # ------------------------------------------------------------ queries
    def lookup(self, aggs: Iterable[str]) -> np.ndarray:
        """Bool per aggregate id: is it one of ``aggs`` (unknown ones
        ignored)."""
        sel = np.zeros(len(self.uuids), bool)
        for a in aggs:
            i = self.ids.get(a)
            if i is not None:
                sel[i] = True
        return sel

    def member_mask(self, aggs: Iterable[str], n: int) -> np.ndarray:
        """Bool per row ``< n``: in at least one of ``aggs``."""
        sel = self.lookup(aggs)
        out = np.zeros(n, bool)
        if sel.any():
            rows, agg = self.entries()
            out[rows[sel[agg]]] = True
        return out

    def row_uuids(self, row: int) -> frozenset[str]:
        return frozenset(self.uuids[i] for i in self.sets[row])

    @property
    def nbytes(self) -> int:
        return (self.e_row.nbytes + self.e_agg.nbytes + self.start.nbytes
                + self.count.nbytes)
