"""``CapacityIndex``: placement's allocation-candidate answer, with numpy.

Layout (``n`` provider rows, each provider keeps its row for life):

* per resource class one ``Column`` (``fleet.columns``): contiguous arrays of
  total, reserved, min/max/step (int32), allocation ratio (float64), used
  and free (int64) -- never a providers x classes matrix;
* per row: uuid, generation, set-up key (``setup_key``), a 128-bit uuid
  key (two uint64, uuid string order, for tie-breaks), trait bitsets and
  aggregate entries (``fleet.membership``); sharing providers (trait
  ``MISC_SHARES_VIA_AGGREGATE``) are a small row set kept alongside.

The index is a cache of placement: a stale row costs the caller a retry of
its claim, nothing more. ``refresh_provider`` updates one row by generation,
``apply`` adds or removes a claim's usage; both cost O(what they touch).

Semantics follow placement 16.0.0 (``shared/placement-semantics.md``
section 2, ``docs/placement-nested-semantics.rst``): provider trees,
sharing providers, the unnumbered and granular request groups,
``group_policy``, ``same_subtree`` and ``mappings``; see
``CandidateRequest``. A flat fleet asked an unnumbered group only goes
through ``flat`` (``Solver``/``Enumerator``); everything else through
``tree.query`` (``TreeSolver``/``TreeEnumerator``; ``trees()`` gives the
tree structure in numpy form).

Besides the rows, the index owns what is done to them: building, updates
(``apply``, ``refresh_provider``, ``replace_usages``, ``set_usages``,
``sync``), usage released for one query, the names check and
``provider_summaries``.
"""

from __future__ import annotations

import contextlib
import random
import threading
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import os_resource_classes
import os_traits

from scheduler_ext import errors
from scheduler_ext.engine.fit import Choice, Fit
from scheduler_ext.engine.flat import Enumerator, Solver
from scheduler_ext.engine.fleet import trees as treelib
from scheduler_ext.engine.fleet.columnar import ColumnarFleet
from scheduler_ext.engine.fleet.columns import Column, column_name, summary_capacity
from scheduler_ext.engine.fleet.membership import AggregateSets, TraitBits
from scheduler_ext.engine.tree import query as tree_query
from scheduler_ext.engine.weigh import Weigher, top_k
from scheduler_ext.placement import allocations, validation
from scheduler_ext.placement.model import SHARING_TRAIT, FleetSnapshot, ProviderRecord
from scheduler_ext.placement.query import CandidateRequest

#: Allocations accepted by ``apply`` and ``released``: ``{rp: {rc: n}}``,
#: or placement's body shapes ``{rp: {"resources": {rc: n}}}`` and
#: ``{"allocations": {...}}``, or a list of any of these.
AllocationsLike = Any

_STANDARD_TRAITS = frozenset(os_traits.get_traits())
_STANDARD_CLASSES = frozenset(os_resource_classes.STANDARDS)

_HEX = np.full(256, 0, np.uint64)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i
_NO_DASH = np.array([i for i in range(36) if i not in (8, 13, 18, 23)])
_SHIFTS = np.arange(60, -4, -4, dtype=np.uint64)


def uuid_keys(uuids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Sort keys of provider uuids: the (high, low) 64-bit halves of each
    canonical uuid, so that comparing ``(high, low)`` orders rows (and
    breaks ties) as placement orders their lower-case uuid strings."""
    if not len(uuids):
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    raw = np.frombuffer("".join(uuids).encode("ascii"), np.uint8)
    nib = _HEX[raw.reshape(len(uuids), 36)[:, _NO_DASH]]
    hi = np.bitwise_or.reduce(nib[:, :16] << _SHIFTS, axis=1)
    lo = np.bitwise_or.reduce(nib[:, 16:] << _SHIFTS, axis=1)
    return hi, lo


def setup_key(record: ProviderRecord) -> int:
    """A provider's set-up (inventories, traits, aggregates, place in its
    tree) as one 64-bit hash, so a refresh tells "only usage changed" (an
    allocation write bumped the generation) from a set-up change without
    comparing arrays. Never 0 (0: unknown); Python's hash: valid in this
    process."""
    p = record.provider
    key = hash((tuple(sorted(record.inventories.items())), record.traits,
                record.aggregates, p.parent_provider_uuid, p.root_provider_uuid))
    return key or 1


def request_names(request: CandidateRequest) -> tuple[set[str], set[str]]:
    """(trait names, resource class names) ``request`` mentions."""
    traits = set(request.root_required | request.root_forbidden)
    classes: set[str] = set()
    for g in request.groups:
        traits |= g.required | g.forbidden
        traits.update(t for names in g.required_any for t in names)
        classes.update(g.resources)
    return traits, classes


class UsageTable:
    """Placement's per-provider, per-class usage aggregate grouped by
    resource class into index rows: ``by_class[rc]`` is (rows, units)."""

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



class CapacityIndex:
    """Vectorized allocation candidates over a snapshot of placement.

    Thread-safe (``lock``). Build with ``from_snapshot`` or
    ``from_columnar``. The row storage is public for the engine's readers
    (``Solver``, ``Enumerator``, the tree path, ``Fit``, ``pinned``; they
    see it as ``fleet.rows.Rows``), which hold ``lock`` and never write
    it: ``n_rows`` rows, ``uuids[row]``, ``row_of[uuid]``,
    ``generations``, ``alive``, ``key_hi``/``key_lo`` (uuid order),
    ``columns[rc]``, ``traits``, ``aggregates``, ``sharing_set`` (rows)
    and ``tree`` (row -> (parent, root) of nested rows). Outside the
    engine providers are named by uuid (``row``, ``rows_of``, ``live``,
    ``live_uuids``, ``root_of``, ``best_of``; the architecture test holds
    to that). ``single_precision_ratio=True`` mirrors a MySQL / MariaDB
    placement whose FLOAT column rounds allocation ratios to float32 in
    the SQL filter. Resource classes held by fewer than
    ``dense_threshold`` of the providers are stored sparse.
    """

    def __init__(self, *, single_precision_ratio: bool = False,
                 dense_threshold: float = 0.25):
        self.single_precision_ratio = single_precision_ratio
        self.dense_threshold = dense_threshold
        self.lock = threading.RLock()
        self.n_rows = 0
        self._cap = 0
        self.uuids: list[str] = []
        self.row_of: dict[str, int] = {}
        self.generations = np.zeros(0, np.int64)
        self.setups = np.zeros(0, np.int64)  # setup_key, 0: unknown
        self.alive = np.zeros(0, bool)
        self.key_hi = np.zeros(0, np.uint64)
        self.key_lo = np.zeros(0, np.uint64)
        self.tree: dict[int, tuple[str | None, str]] = {}  # nested rows
        self.columns: dict[str, Column] = {}
        self.traits = TraitBits()
        self.aggregates = AggregateSets()
        self.sharing_set: set[int] = set()
        self.solver = Solver(self)
        #: bumped whenever rows appear, die or change parent (trees() cache)
        self.structure_version = 0
        self.tree_cache: tuple | None = None  # see ``tree.query.state``
        #: custom names placement knows (None: unknown; ``_check_names``)
        self.known_traits: frozenset[str] | None = None
        self.known_classes: frozenset[str] | None = None

    # ------------------------------------------------------------ building
    @classmethod
    def from_snapshot(cls, snapshot: FleetSnapshot, **kwargs: Any) -> "CapacityIndex":
        """Index every provider of ``snapshot`` (``client.snapshot()``)."""
        idx = cls.from_columnar(ColumnarFleet.from_snapshot(snapshot), **kwargs)
        idx.setups[:idx.n_rows] = [setup_key(r) for r in snapshot.providers]
        idx.set_known_names(snapshot.custom_traits, snapshot.custom_classes)
        return idx

    @classmethod
    def from_columnar(cls, fleet: ColumnarFleet, **kwargs: Any) -> "CapacityIndex":
        """Index a ``ColumnarFleet`` (rows keep their order)."""
        idx = cls(**kwargs)
        n = len(fleet)
        idx._reserve(n, exact=True)
        idx.n_rows = n
        idx.uuids = [validation.uuid(u, "uuid") if len(u) != 36 or u.lower() != u
                      else u for u in fleet.uuids]
        idx.row_of = {u: i for i, u in enumerate(idx.uuids)}
        if len(idx.row_of) != n:
            raise validation.bad("uuids", "duplicates", "provider uuids must be distinct")
        idx.generations[:n] = fleet.generations
        idx.alive[:n] = True
        idx.key_hi[:n], idx.key_lo[:n] = uuid_keys(idx.uuids)
        for rc, ic in fleet.inventories.items():
            column_name(rc)
            dense = len(ic.rows) >= idx.dense_threshold * n
            col = Column(rc, idx._cap, sparse=not dense,
                         single_precision=idx.single_precision_ratio)
            col.load(ic.rows, ic.total, ic.reserved, ic.min_unit, ic.max_unit,
                     ic.step_size, ic.allocation_ratio, ic.used)
            idx.columns[rc] = col
        idx.traits.load(fleet.trait_set_of, fleet.trait_sets)
        idx.aggregates.load(fleet.aggregate_set_of,
                       [frozenset(a.lower() for a in s) for s in fleet.aggregate_sets])
        idx.sharing_set = set(np.flatnonzero(
            idx.traits.any_of([SHARING_TRAIT], n)).tolist())
        if fleet.parents is not None and fleet.roots is not None:
            for row, parent in enumerate(fleet.parents):
                if parent:
                    idx.tree[row] = (parent, fleet.roots[row])
        return idx

    def set_known_names(self, traits: Iterable[str] | None,
                        classes: Iterable[str] | None) -> None:
        """The custom traits and resource classes placement knows (from a
        full snapshot); None: not known (see ``_check_names``)."""
        self.known_traits = None if traits is None else frozenset(traits)
        self.known_classes = None if classes is None else frozenset(classes)

    def _reserve(self, size: int, exact: bool = False) -> None:
        if size <= self._cap:
            return
        cap = size if exact else max(size, 2 * self._cap, 64)

        def grow(a: np.ndarray) -> np.ndarray:
            new = np.zeros(cap, a.dtype)
            new[:len(a)] = a
            return new

        self.generations, self.alive, self.setups = map(
            grow, (self.generations, self.alive, self.setups))
        self.key_hi, self.key_lo = grow(self.key_hi), grow(self.key_lo)
        for col in self.columns.values():
            col.grow(cap)
        self.traits.grow(cap)
        self.aggregates.grow(cap)
        self._cap = cap

    # ---------------------------------------------------------- inspection
    def __len__(self) -> int:
        """Live providers."""
        return int(self.alive[:self.n_rows].sum())

    @property
    def resource_classes(self) -> list[str]:
        return sorted(self.columns)

    def generation(self, rp_uuid: str) -> int | None:
        """The generation last indexed for ``rp_uuid`` (None if unknown)."""
        row = self.row_of.get(rp_uuid)
        return None if row is None or not self.alive[row] else int(self.generations[row])

    def usage(self, rp_uuid: str) -> dict[str, int]:
        """Indexed usage per class held by ``rp_uuid`` (units)."""
        with self.lock:
            row = self.row_of.get(rp_uuid)
            if row is None or not self.alive[row]:
                return {}
            return {rc: s[1] for rc, col in self.columns.items()
                    if (s := col.summary(row)) is not None}

    # ------------------------------------------------------ rows by name
    # (for the readers outside the engine, which name providers by uuid
    # and rows only as a ``Fit`` gives them)
    def row(self, rp_uuid: str) -> int | None:
        """The row ``rp_uuid`` is held in (what a ``Fit``'s rows name it
        by); None when the index never held it."""
        return self.row_of.get(rp_uuid)

    def rows_of(self, rp_uuids: Iterable[str]) -> np.ndarray:
        """The rows of those of ``rp_uuids`` the index holds, in order
        (int64; the others left out)."""
        return np.array([r for u in rp_uuids if (r := self.row_of.get(u)) is not None],
                        np.int64)

    def row_mask(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """bool per row of the index, True at ``rows``."""
        mask = np.zeros(self.n_rows, bool)
        mask[np.asarray(rows, np.int64)] = True
        return mask

    def live(self, rp_uuids: Sequence[str | None]) -> np.ndarray:
        """bool per uuid: held and not removed (None: False)."""
        rows = np.array([-1 if u is None else self.row_of.get(u, -1)
                         for u in rp_uuids], np.int64)
        return (rows >= 0) & self.alive[rows]    # row -1: masked

    def live_uuids(self) -> list[str]:
        """Every provider held (not removed)."""
        return [u for u, row in list(self.row_of.items()) if self.alive[row]]

    def best_of(self, weights: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
        """Positions of the ``k`` best of ``rows``: ``weights`` descending,
        then the uuid ascending (``weigh.top_k``)."""
        return top_k(weights, self.key_hi, self.key_lo, k, rows=rows)

    def root_of(self, rp_uuids: Iterable[str]) -> str | None:
        """The one root the non-sharing providers of ``rp_uuids`` belong to
        (a server's compute node; shared pools left out); None when one of
        them is unknown or dead, or they are not under exactly one root."""
        roots = set()
        with self.lock:
            for rp in rp_uuids:
                row = self.row_of.get(rp)
                if row is None or not self.alive[row]:
                    return None
                if row not in self.sharing_set:
                    roots.add(self.tree.get(row, (None, rp))[1])
        return roots.pop() if len(roots) == 1 else None

    def memory(self) -> dict[str, float]:
        """Bytes held in numpy arrays, and the per-provider-per-class figure
        (column bytes / (providers x classes))."""
        cols = sum(c.nbytes for c in self.columns.values())
        rows = sum(a.nbytes for a in (self.generations, self.alive, self.setups,
                                      self.key_hi, self.key_lo))
        per = cols / max(1, self.n_rows * max(1, len(self.columns)))
        return {"columns": cols, "rows": rows, "traits": self.traits.nbytes,
                "aggregates": self.aggregates.nbytes,
                "total": cols + rows + self.traits.nbytes + self.aggregates.nbytes,
                "bytes_per_provider_per_class": per}

    # ------------------------------------------------------------- updates
    def apply(self, allocs: AllocationsLike, sign: int = 1) -> list[tuple[str, str]]:
        """Add (``sign=1``, a claim) or remove (``sign=-1``, a release) usage.

        O(entries). Returns the (provider, class) pairs the index does not
        hold (a stale cache: refresh those providers).
        """
        if sign not in (1, -1):
            raise validation.bad("sign", sign, "must be 1 or -1")
        lists = allocations.normalized_list(allocs, "allocations")
        missing = []
        with self.lock:
            for allocs_ in lists:
                for rp, res in allocs_.items():
                    row = self.row_of.get(rp)
                    for rc, n in res.items():
                        col = self.columns.get(rc)
                        if row is None or col is None or not col.add_used(row, sign * n):
                            missing.append((rp, rc))
        return missing

    def replace_usages(self, entries: Iterable[tuple[str, str, int]],
                       keep: Iterable[str] = ()) -> None:
        """Set every provider's usage from ``(uuid, class, used)`` rows
        (placement's usage aggregate; unlisted: unused), except ``keep``
        (re-read more recently), who keep the usage they hold. O(providers)
        in numpy per class."""
        table = UsageTable.grouped(entries, self.row_of)  # before the lock
        with self.lock:
            kept = [r for u in keep if (r := self.row_of.get(u)) is not None]
            for rc, col in self.columns.items():
                col.replace_used(*table.for_column(rc, col, kept))

    def set_usages(self, usage: Mapping[str, Mapping[str, int]]) -> None:
        """Set the usage of the providers ``usage`` names (uuid -> class ->
        used; a class not listed: 0) in every class they hold an inventory
        of; unknown providers and classes without an inventory are skipped.
        O(providers x classes) in numpy."""
        with self.lock:
            known = [(r, n) for u, n in usage.items()
                     if (r := self.row_of.get(u)) is not None]
            if not known:
                return
            rows = np.array([r for r, _ in known], np.int64)
            for rc, col in self.columns.items():
                col.set_used(rows, np.array([n.get(rc, 0) for _, n in known], np.int64))

    def refresh_provider(self, record: ProviderRecord) -> bool:
        """Re-index one provider if its generation changed (new: appended;
        only usage changed, as after an allocation write: usage and
        generation only). At an unchanged generation usage is still compared
        (DELETE /allocations bumps nothing). True if anything was written."""
        if not isinstance(record, ProviderRecord):
            raise validation.bad("record", record, "must be a ProviderRecord")
        with self.lock:
            uuid = record.provider.uuid
            row = self.row_of.get(uuid)
            if row is not None and self.alive[row] and \
                    self.generations[row] == record.provider.generation:
                return self._refresh_usage(row, record)
            key = setup_key(record)
            if row is not None and self.alive[row] and self.setups[row] == key:
                self._refresh_usage(row, record)
                self.generations[row] = record.provider.generation
                return True
            row = self._append(validation.uuid(uuid, "uuid")) if row is None else row
            self._write(row, record)
            self.setups[row] = key
            return True

    def _refresh_usage(self, row: int, rec: ProviderRecord) -> bool:
        """Take ``rec``'s usages into ``row``; re-index the row when ``rec``
        holds a class the row has no inventory of. Whether anything
        changed."""
        deltas = []
        for rc in rec.inventories:
            col = self.columns.get(rc)
            p = col.pos(row) if col is not None else -1
            if col is None or p < 0 or col.total[p] == 0:
                self._write(row, rec)   # inventory differs
                return True
            deltas.append((col, int(rec.usages.get(rc, 0)) - int(col.used[p])))
        for col, delta in deltas:
            if delta:
                col.add_used(row, delta)
        return any(delta for _, delta in deltas)

    def remove_provider(self, rp_uuid: str) -> bool:
        """Forget a deleted provider (its row stays, empty). True if it was live."""
        with self.lock:
            row = self.row_of.get(rp_uuid)
            if row is None or not self.alive[row]:
                return False
            for col in self.columns.values():
                col.set(row, None, 0)
            self.traits.set_row(row, ())
            self.aggregates.set_row(row, ())
            if row in self.sharing_set:
                self.sharing_set.discard(row)
                self.solver.forget_sharing()
            self.tree.pop(row, None)
            self.alive[row] = self.setups[row] = False
            self.structure_version += 1
            return True

    def sync(self, snapshot: FleetSnapshot) -> tuple[int, int]:
        """refresh_provider for each record; remove the others. (written, removed)"""
        with self.lock:
            changed = sum(self.refresh_provider(r) for r in snapshot.providers)
            seen = {r.provider.uuid for r in snapshot.providers}
            gone = [u for u, row in self.row_of.items()
                    if self.alive[row] and u not in seen]
            for u in gone:
                self.remove_provider(u)
            self.set_known_names(snapshot.custom_traits, snapshot.custom_classes)
            return changed, len(gone)

    def _append(self, uuid: str) -> int:
        row = self.n_rows
        self._reserve(row + 1)
        self.n_rows += 1
        self.uuids.append(uuid)
        self.row_of[uuid] = row
        hi, lo = uuid_keys([uuid])
        self.key_hi[row], self.key_lo[row] = hi[0], lo[0]
        self.structure_version += 1
        return row

    def _write(self, row: int, rec: ProviderRecord) -> None:
        invs = rec.inventories
        for rc in invs:
            if rc not in self.columns:
                column_name(rc)
                self.columns[rc] = Column(rc, self._cap, sparse=True,
                                        single_precision=self.single_precision_ratio)
        for rc, col in self.columns.items():
            inv = invs.get(rc)
            if inv is None and col.pos(row) < 0:
                continue
            col.set(row, inv, int(rec.usages.get(rc, 0)))
            if col.sparse and col.count > self.dense_threshold * self.n_rows:
                col.densify(self._cap)
        self.traits.set_row(row, rec.traits)
        was = row in self.sharing_set
        now = SHARING_TRAIT in rec.traits
        changed = self.aggregates.set_row(row, (a.lower() for a in rec.aggregates))
        if now:
            self.sharing_set.add(row)
        else:
            self.sharing_set.discard(row)
        if was != now or (now and changed):
            self.solver.forget_sharing()
        parent = rec.provider.parent_provider_uuid
        was_tree = self.tree.get(row)
        if parent:
            self.tree[row] = (parent, rec.provider.root_provider_uuid)
        else:
            self.tree.pop(row, None)
        if was_tree != self.tree.get(row) or not self.alive[row]:
            self.structure_version += 1
        self.generations[row] = rec.provider.generation
        self.alive[row] = True

    # -------------------------------------------------------------- trees
    def trees(self) -> treelib.Trees:
        """The tree structure of the rows (rebuilt when it changed)."""
        return tree_query.state(self)[0]

    def tree_members(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """Every live row of the trees holding ``rows``."""
        return tree_query.members(self, rows)

    def sharing_rows(self) -> np.ndarray:
        """Sorted rows of the sharing providers."""
        return self.solver.sharing_rows()

    def _tree_path(self, request: CandidateRequest) -> bool:
        self._check_names(request)
        return bool(request.granular) or len(request.trait_groups) > 64 or self.trees().nested

    # ------------------------------------------------------------ queries
    def fit(self, request: CandidateRequest, released: AllocationsLike = None, *,
            include_sharing_roots: bool = False, only: np.ndarray | None = None) -> Fit:
        """The scheduler's fast path: every root that fits ``request`` with
        one allocation each, as arrays (no JSON built).

        ``released`` (``{rp: {rc: n}}`` or a list) is treated as free, e.g.
        the old allocations of a moving server, on any provider of a tree
        (children included); placement is not touched. Sharing providers
        are not returned as roots unless ``include_sharing_roots`` (they
        are no compute hosts). ``only`` (rows) may leave out every other
        root; each root's pick is the same either way (the tree path
        solves every root). ``request.limit``/``randomize`` do not apply.
        """
        with self.lock, self._released(released) as freed:
            if self._tree_path(request):
                return tree_query.fit(self, request, freed, include_sharing_roots)
            ev = self.solver.evaluate(request)
            self.solver.restrict(ev, only, include_sharing_roots)
            rows, sources = self.solver.solve(ev)
            return Fit(self, request, rows, sources, dict(freed))

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
        roots by uuid, then preferred suppliers first), ``limit`` keeping
        the first N or, with ``randomize``, a sample drawn with ``rng`` (a
        ``random.Random`` or a seed). O(candidates) in Python: a scheduler
        wants ``fit``/``select``.
        """
        with self.lock, self._released(released):
            if self._tree_path(request):
                return tree_query.answer(self, request, rng)
            ev = self.solver.evaluate(request)
            return Enumerator(self, self.solver, ev).placement_answer(rng)

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
            parent, root = self.tree.get(r, (None, self.uuids[r]))
            res: dict[str, dict] = {}
            res_of.append(res)
            out[self.uuids[r]] = {
                "resources": res, "traits": sorted(self.traits.names[r]),
                "parent_provider_uuid": parent, "root_provider_uuid": root}
        for rc in sorted(self.columns):
            col = self.columns[rc]
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

    # ------------------------------------------------------- query helpers
    @contextlib.contextmanager
    def _released(self, allocs: AllocationsLike
                  ) -> Iterator[dict[tuple[int, str], int]]:
        """Usage treated as free for one query (a moving server's old
        allocations): ``allocs`` (``{rp: {rc: n}}``, a body shape or a
        list; see ``allocations.normalized_list``) subtracted from usage
        for the block, then restored. Providers (any provider of a tree)
        or classes the index lacks are ignored (nothing to free). Yields
        ``{(row, rc): units}`` of what was subtracted. The caller holds the
        lock."""
        overlay: dict[tuple[int, str], int] = {}
        for allocs_ in allocations.normalized_list(allocs, "released"):
            for rp, res in allocs_.items():
                row = self.row_of.get(rp)
                for rc, n in res.items():
                    col = self.columns.get(rc)
                    if row is None or col is None or not col.holds(row):
                        continue
                    overlay[(row, rc)] = overlay.get((row, rc), 0) + n
        done: list[tuple[int, str, int]] = []
        try:
            for (row, rc), n in overlay.items():
                self.columns[rc].add_used(row, -n)
                done.append((row, rc, n))
            yield overlay
        finally:
            for row, rc, n in done:
                self.columns[rc].add_used(row, n)

    def _check_names(self, request: CandidateRequest) -> None:
        """Trait and resource class names checked as placement does: raise
        ``InvalidRequest`` (placement's 400, ``TraitNotFound`` /
        ``ResourceClassNotFound``) for a name placement does not know.
        Standard names (os-traits, os-resource-classes) are known to every
        placement; a ``CUSTOM_`` name is known when a provider here holds
        it or placement's custom names were given (``set_known_names``).
        Otherwise raise ``Unsupported``: only placement can answer."""
        if not isinstance(request, CandidateRequest):
            raise validation.bad("request", request, "must be a CandidateRequest")
        traits, classes = request_names(request)
        for name in sorted(traits):
            if name in _STANDARD_TRAITS or name in self.traits.ids:
                continue
            if self.known_traits is None:
                raise errors.Unsupported(
                    f"trait {name} is on no provider here: only placement knows "
                    "whether it exists")
            if name not in self.known_traits:
                raise errors.InvalidRequest(f"No such trait(s): {name}",
                                            field="required", value=name)
        for rc in sorted(classes):
            if rc in _STANDARD_CLASSES or rc in self.columns:
                continue
            if self.known_classes is None:
                raise errors.Unsupported(
                    f"resource class {rc} is on no provider here: only placement "
                    "knows whether it exists")
            if rc not in self.known_classes:
                raise errors.InvalidRequest(
                    f"Invalid resource class in resources parameter: {rc}",
                    field="resources", value=rc)
