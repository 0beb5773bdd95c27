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
before: the database sums a hash of those rows per bucket of ``bucket``
consecutive ids (a few numbers sent back, not the rows); only the
buckets whose sum (or row count) differs are re-read and compared row by
row, where a row that appeared late, was replaced or vanished marks its
provider changed (a vanished row is a decrease seen early). Recent rows
vanish all the time (a deleted server, a confirmed resize, every move's
claim rewriting the instance's rows), so the buckets keep that compare
to the few dozen rows around each change rather than the whole tail. A
write hidden deeper than the tail is caught by the next ``reread`` or,
at the latest, by the failed claim it causes (the driver then re-reads
the provider).

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

from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.placement.model import ConsumerAllocations, FleetSnapshot
from scheduler_ext.placement.sql_snapshot import AllocationRow, SqlSnapshot, TailSums
from scheduler_ext.sources.changes import IndexUpdate

#: Allocation ids re-read behind the newest one seen (see module docstring):
#: covers commits up to this many rows late and sqlite id reuse this deep.
TAIL_ROWS = 512
#: Allocation ids per checksum bucket of the tail (see module docstring).
BUCKET = 32
#: Providers per IN (...) list (sqlite allows 999 variables in old builds).
CHUNK = 500


class SqlChanges:
    """``ChangeSource`` over ``SqlSnapshot`` (placement's database)."""

    name = "sql"

    def __init__(self, sql: SqlSnapshot, tail_rows: int = TAIL_ROWS,
                 bucket: int = BUCKET):
        self.sql = sql
        self.tail_rows = tail_rows
        self.bucket = bucket
        self.high = 0  # largest allocation id seen
        #: allocation id -> (provider id, class id, used, hash), ids >
        #: high - tail, ascending
        self.tail: dict[int, tuple[int, int, int, int]] = {}
        #: the tail's checksum per bucket, as ``SqlSnapshot.poll_after``
        #: gives it for the same rows
        self.tail_sums: TailSums = {}
        self.uuid_of: dict[int, str] = {}  # provider database id -> uuid
        self.rows_read = 0  # allocation rows the probe read (statistics)

    # ------------------------------------------------------------- probe
    def _probe(self, buckets: list[int], low: int) -> set[int]:
        """Database ids of the providers whose allocation rows in the tail
        buckets ``buckets`` (ids in ``(low, high]``) changed since they
        were last read; those buckets of the tail take the rows read."""
        rows = self.sql.allocations_in(low, self.high, buckets, self.bucket)
        self.rows_read += len(rows)
        tail, size = self.tail, self.bucket
        wanted = set(buckets)
        now = {r[0]: r[1:] for r in rows}
        touched = set()
        for i, row in now.items():
            before = tail.get(i)
            if before != row:
                touched.add(row[0])
                if before is not None:
                    touched.add(before[0])
        gone = [i for i in tail if i - i % size in wanted and i not in now]
        touched.update(tail.pop(i)[0] for i in gone)
        late = any(i not in tail for i in now)
        tail.update(now)
        if late:    # keep the tail ascending (``_slide`` relies on it)
            self.tail = dict(sorted(tail.items()))
        for b in wanted:
            self.tail_sums.pop(b, None)
        for i, row in now.items():
            self._tally(i, row[3], 1)
        return touched

    def _keep_tail(self, rows: list[AllocationRow]) -> None:
        if rows:
            self.high = max(self.high, rows[-1][0])
        low = self.high - self.tail_rows
        self.tail = {r[0]: r[1:] for r in rows if r[0] > low}
        self._sum_tail()

    def _sum_tail(self) -> None:
        self.tail_sums = {}
        for i, row in self.tail.items():
            self._tally(i, row[3], 1)

    def _tally(self, i: int, digest: int, sign: int) -> None:
        """Count the tail row with id ``i`` and hash ``digest`` in (``sign``
        1) or out of (-1) its bucket's checksum; an empty bucket is left
        out, as the database leaves it out."""
        b = i - i % self.bucket
        n, h = self.tail_sums.get(b, (0, 0))
        if n + sign:
            self.tail_sums[b] = (n + sign, h + sign * digest)
        else:
            del self.tail_sums[b]

    def _slide(self, fresh: list[AllocationRow]) -> None:
        """Take rows above ``high`` (ascending) into the tail, dropping
        those that fall below it."""
        tail = self.tail
        for r in fresh:
            tail[r[0]] = r[1:]
            self._tally(r[0], r[4], 1)
        self.high = max(self.high, fresh[-1][0])
        low = self.high - self.tail_rows
        drop = []
        for i in tail:  # ascending: stop at the first one kept
            if i > low:
                break
            drop.append(i)
        for i in drop:
            self._tally(i, tail.pop(i)[3], -1)

    def _records(self, ids: Iterable[int]) -> IndexUpdate:
        """Fresh records of the providers ``ids``; those gone are removed."""
        wanted = sorted(set(ids))
        out = IndexUpdate()
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

    def poll(self, index: CapacityIndex) -> IndexUpdate:
        """One statement when the tail's checksum is unchanged: the rows
        above ``high`` and the usage of their providers. Else also the rows
        of the tail's buckets whose checksum differs (``_probe``), then the
        usage of the providers their compare marks, in two more statements.
        Indexed providers take that usage only (their set-up waits for the
        re-read); others are read whole."""
        low = max(0, self.high - self.tail_rows)
        fresh, sums, usage = self.sql.poll_after(self.high, low, self.bucket)
        touched: set[int] = set()
        if sums != self.tail_sums:
            mine = self.tail_sums
            touched = self._probe(sorted(b for b in sums.keys() | mine.keys()
                                         if sums.get(b) != mine.get(b)), low)
            ordered = sorted(touched)
            for i in ordered:   # read again below, after the compare
                usage.pop(i, None)
            for k in range(0, len(ordered), CHUNK):
                usage.update(self.sql.usage_of(ordered[k:k + CHUNK]))
        self.rows_read += len(fresh)
        if fresh:
            self._slide(fresh)
        ids = touched | {r[1] for r in fresh}
        if not ids:
            return IndexUpdate()
        return self._take(sorted(ids), usage, index)

    def _take(self, ids: list[int], usage: dict[int, dict[str, int]],
              index: CapacityIndex) -> IndexUpdate:
        """The update for the providers ``ids``: ``usage`` (provider id ->
        class -> used) for the live indexed ones it covers, whole records
        (or their removal) for the rest."""
        uuids = [self.uuid_of.get(i) for i in ids]
        live = index.live(uuids)
        out, unknown = IndexUpdate(), []
        for i, u, ok in zip(ids, uuids, live.tolist()):
            if ok and i in usage:
                out.usage[u] = usage[i]  # type: ignore[index]
            else:
                unknown.append(i)
        if unknown:
            whole = self._records(unknown)
            out.records, out.removed = whole.records, whole.removed
        return out

    def read(self, uuids: Iterable[str]) -> IndexUpdate:
        wanted = set(uuids)
        out = IndexUpdate()
        for k in range(0, len(wanted), CHUNK):
            part = sorted(wanted)[k:k + CHUNK]
            records = self.sql.snapshot(part).providers
            found = {r.provider.uuid for r in records}
            out.records += records
            out.removed += [u for u in part if u not in found]
        return out

    def reread(self, index: CapacityIndex) -> IndexUpdate:
        table = self.sql.provider_table()
        self.uuid_of = {i: u for i, u, _ in table}
        moved = [i for i, u, g in table if index.generation(u) != g]
        out = self._records(moved)
        listed = set(self.uuid_of.values())
        out.removed += [u for u in index.live_uuids() if u not in listed]
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
