"""Changes read from placement's database: a poll that costs what changed.

What placement's schema offers for change detection, and the choice:

* provider generations (``resource_providers.generation``) move on every
  write that adds usage to a provider and on inventory, trait and
  aggregate changes, but the column has no index: finding the moved ones
  means reading every provider (about 100 ms per 100,000 providers), so
  generations are compared off the request path (``reread``) only;
* consumer generations (``consumers.generation``) are per consumer, not
  per provider, and not indexed either;
* allocation ids (``allocations.id``, the primary key): placement writes a
  consumer's allocations by deleting its rows and inserting new ones, so
  every write that adds usage anywhere inserts rows with new ids, and
  ``WHERE id > :low`` is an index range scan costing the rows written
  since, whatever the fleet size. This is the request-path probe.

Ids are not quite monotonic in what a reader sees: on PostgreSQL and
MySQL a transaction holding a lower id may commit after one holding a
higher id, and on sqlite (no AUTOINCREMENT on that table) deleting the
newest rows lets the next insert reuse their ids. So the probe checks a
tail of the last ``tail_rows`` ids it saw against what it saw there
before: the database sums a hash of those rows (nothing sent back); only
when the sum (or the row count) differs does it re-read the tail and
compare it row by row, where a row that appeared late, was replaced or
vanished marks its provider changed (a vanished row is a decrease seen
early). A write hidden deeper than the tail is caught by the next
``reread`` or, at the latest, by the failed claim it causes (the driver
then re-reads the provider).

What changed is read by value, in the same statement as the probe: the
usage of the providers the new rows name (every allocation row of theirs,
summed by the database). An indexed provider takes that usage only; its
generation and set-up (inventories, traits, aggregates: a poll never
learns of a set-up change that wrote no allocation anyway) stay as
indexed, so the next ``reread`` finds its generation moved and reads it
whole. The providers the row-by-row tail compare marks take their usage
the same way, read in one more statement (a provider deleted meanwhile
gives none and is read whole: removed). A provider the index does not
hold yet is read whole at once.
"""

from __future__ import annotations

import sys
from typing import Iterable

import numpy as np

from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.placement.model import ConsumerAllocations, FleetSnapshot
from scheduler_ext.placement.sql_snapshot import AllocationRow, SqlSnapshot, TailSums
from scheduler_ext.sources.changes import Changes, live_uuids

#: Allocation ids re-read behind the newest one seen (see module docstring):
#: covers commits up to this many rows late and sqlite id reuse this deep.
TAIL_ROWS = 512
#: Providers per IN (...) list (sqlite allows 999 variables in old builds).
CHUNK = 500


class SqlChanges:
    """``ChangeSource`` over ``SqlSnapshot`` (placement's database)."""

    name = "sql"

    def __init__(self, sql: SqlSnapshot, tail_rows: int = TAIL_ROWS):
        self.sql = sql
        self.tail_rows = tail_rows
        self.high = 0  # largest allocation id seen
        #: allocation id -> (provider id, class id, used, hash), ids >
        #: high - tail, ascending
        self.tail: dict[int, tuple[int, int, int, int]] = {}
        self.tail_sums: TailSums = (0, 0)  # see ``SqlSnapshot.poll_after``
        self.uuid_of: dict[int, str] = {}  # provider database id -> uuid
        self.rows_read = 0  # allocation rows the probe read (statistics)

    # ------------------------------------------------------------- probe
    def _probe(self) -> set[int]:
        """Database ids of the providers whose allocation rows changed
        since the last probe."""
        low = max(0, self.high - self.tail_rows)
        rows = self.sql.allocations_after(low)
        self.rows_read += len(rows)
        touched = set()
        tail = self.tail
        now = {r[0]: r[1:] for r in rows}
        for i, row in now.items():
            before = tail.get(i)
            if before != row:
                touched.add(row[0])
                if before is not None:
                    touched.add(before[0])
        if len(now) < len(tail) or any(i not in now for i in tail):
            touched.update(b[0] for i, b in tail.items() if i > low and i not in now)
        self._keep_tail(rows)
        return touched

    def _keep_tail(self, rows: list[AllocationRow]) -> None:
        if rows:
            self.high = max(self.high, rows[-1][0])
        low = self.high - self.tail_rows
        self.tail = {r[0]: r[1:] for r in rows if r[0] > low}
        self._sum_tail()

    def _sum_tail(self) -> None:
        values = self.tail.values()
        self.tail_sums = (len(values), sum(v[3] for v in values))

    def _slide(self, fresh: list[AllocationRow]) -> None:
        """Take rows above ``high`` (ascending) into the tail, dropping
        those that fall below it."""
        tail, total = self.tail, self.tail_sums[1]
        for r in fresh:
            tail[r[0]] = r[1:]
            total += r[4]
        self.high = max(self.high, fresh[-1][0])
        low = self.high - self.tail_rows
        drop = []
        for i in tail:  # ascending: stop at the first one kept
            if i > low:
                break
            drop.append(i)
        for i in drop:
            total -= tail.pop(i)[3]
        self.tail_sums = (len(tail), total)

    def _records(self, ids: Iterable[int]) -> Changes:
        """Fresh records of the providers ``ids``; those gone are removed."""
        wanted = sorted(set(ids))
        out = Changes()
        for k in range(0, len(wanted), CHUNK):
            part = wanted[k:k + CHUNK]
            records = self.sql.records(part).providers
            found = {r.provider.uuid for r in records}
            out.records += records
            out.removed += [u for i in part
                            if (u := self.uuid_of.get(i)) is not None and u not in found]
        return out

    # ---------------------------------------------------------- protocol
    def full_read(self) -> FleetSnapshot:
        # the tail first: a row committed between the two reads is then in
        # the snapshot and seen again by the next poll (read by value)
        self.high = self.sql.max_allocation_id()
        self._keep_tail(self.sql.allocations_after(max(0, self.high - self.tail_rows)))
        self.uuid_of = {i: u for i, u, _ in self.sql.provider_table()}
        return self.sql.snapshot()

    def poll(self, index: CapacityIndex) -> Changes:
        """One statement when the tail's checksum is unchanged: the rows
        above ``high`` and the usage of their providers. Else the full
        compare of the tail (``_probe``), then the usage of the providers it
        marks, in one more statement. Indexed providers take that usage only
        (their set-up waits for the re-read); others are read whole."""
        fresh, sums, usage = self.sql.poll_after(
            self.high, max(0, self.high - self.tail_rows))
        if sums != self.tail_sums:
            touched = sorted(self._probe())
            usage = {}
            for k in range(0, len(touched), CHUNK):
                usage.update(self.sql.usage_of(touched[k:k + CHUNK]))
            return self._take(touched, usage, index)
        self.rows_read += len(fresh)
        if not fresh:
            return Changes()
        self._slide(fresh)
        return self._take(list({r[1] for r in fresh}), usage, index)

    def _take(self, ids: list[int], usage: dict[int, dict[str, int]],
              index: CapacityIndex) -> Changes:
        """Changes for the providers ``ids``: ``usage`` (provider id ->
        class -> used) for the live indexed ones it covers, whole records
        (or their removal) for the rest."""
        uuids = [self.uuid_of.get(i) for i in ids]
        rows = np.array([-1 if u is None else index.row_of.get(u, -1) for u in uuids],
                        np.int64)
        live = (rows >= 0) & index.alive[rows]   # row -1: masked
        out, unknown = Changes(), []
        for i, u, ok in zip(ids, uuids, live.tolist()):
            if ok and i in usage:
                out.usage[u] = usage[i]  # type: ignore[index]
            else:
                unknown.append(i)
        if unknown:
            whole = self._records(unknown)
            out.records, out.removed = whole.records, whole.removed
        return out

    def read(self, uuids: Iterable[str]) -> Changes:
        wanted = set(uuids)
        out = Changes()
        for k in range(0, len(wanted), CHUNK):
            part = sorted(wanted)[k:k + CHUNK]
            records = self.sql.snapshot(part).providers
            found = {r.provider.uuid for r in records}
            out.records += records
            out.removed += [u for u in part if u not in found]
        return out

    def reread(self, index: CapacityIndex) -> Changes:
        table = self.sql.provider_table()
        self.uuid_of = {i: u for i, u, _ in table}
        moved = [i for i, u, g in table if index.generation(u) != g]
        out = self._records(moved)
        listed = set(self.uuid_of.values())
        out.removed += [u for u in live_uuids(index) if u not in listed]
        out.usages = self.sql.usage_rows()
        return out

    def consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        """One indexed statement (``SqlSnapshot.consumer``), where the API
        costs an HTTP round trip through placement."""
        return self.sql.consumer(consumer_uuid)

    def tracking_bytes(self) -> int:
        """The tail and the provider id -> uuid map, as Python objects."""
        tail = sys.getsizeof(self.tail) + sum(
            sys.getsizeof(i) + sys.getsizeof(r) for i, r in self.tail.items())
        ids = sys.getsizeof(self.uuid_of) + sum(
            sys.getsizeof(i) + sys.getsizeof(u) for i, u in self.uuid_of.items())
        return tail + ids
