"""Read the fleet straight from placement's database (read-only).

Placement has no bulk read endpoint: over its API a snapshot costs four
GETs per provider (tens of minutes at 50k providers). Its database answers
the same question in a few queries. This reader needs SQLAlchemy and a
database driver for the URL (the one placement itself uses), and a
read-only account is enough: it never writes.

Besides full and partial snapshots it offers the cheap change probe the
fleet view polls before each decision: the newest rows of ``allocations``
by id, a checksum of the tail below them and the usage of the providers
they name, in one statement (``poll_after``: index range scans whose cost
follows the rows written, not the fleet). Every allocation write deletes
the consumer's rows and inserts new ones, so each write that adds usage
shows up there as new ids (see ``sources/sql_changes.py`` for why this,
and not provider or consumer generations, is the probe). Every read is
one statement on an autocommit connection: its own snapshot, one round
trip.
"""

from __future__ import annotations

import collections
from typing import Any, Iterable

from scheduler_ext import errors
from scheduler_ext.placement import sql_statements as q
from scheduler_ext.placement import validation
from scheduler_ext.placement.model import (ConsumerAllocations, FleetSnapshot,
                                           Inventory, Provider, ProviderRecord)

OPTION = "placement_database_connection"

#: One allocation row as the change probe sees it: (id, provider id,
#: resource class id, used, hash of the first four).
AllocationRow = tuple[int, int, int, int, int]
#: The tail's checksum: bucket (its first allocation id) -> (rows, sum of
#: their hashes); buckets without rows are left out.
TailSums = dict[int, tuple[int, int]]


#: DB-API paramstyle -> (placeholder of ``_fast``'s one bound parameter,
#: the parameters for its value)
_PLACEHOLDER: dict[str, tuple[str, Any]] = {
    "qmark": ("?", lambda v: (v,)),
    "format": ("%s", lambda v: (v,)),
    "numeric": (":1", lambda v: (v,)),
    "named": (":bound", lambda v: {"bound": v}),
    "pyformat": ("%(bound)s", lambda v: {"bound": v}),
}


class SqlSnapshot:
    """Snapshots of placement's database at ``url`` (an SQLAlchemy URL,
    e.g. placement's own ``[placement_database]connection``)."""

    def __init__(self, url: str):
        try:
            import sqlalchemy
        except ImportError as exc:
            raise errors.SchedulerExtError(
                "the sql snapshot source needs SQLAlchemy and the database's "
                "driver installed") from exc
        self._sa = sqlalchemy
        self._statements: dict[str, Any] = {}
        self._names: dict[str, dict[int, str]] = {k: {} for k in q.NAMES}
        try:
            self._url = sqlalchemy.engine.make_url(url)
            # every read is one statement (its own snapshot): no BEGIN or
            # ROLLBACK round trips around it
            self._engine = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
        except Exception as exc:
            raise errors.InvalidRequest(
                f"placement database URL is not usable: {exc}",
                field=OPTION, value="<hidden>") from exc

    @property
    def where(self) -> str:
        """The database's location for messages (no credentials):
        ``backend://host:port/database``."""
        u = self._url
        host = (u.host or "localhost") if u.get_backend_name() != "sqlite" else ""
        port = f":{u.port}" if u.port else ""
        return f"{u.get_backend_name()}://{host}{port}/{u.database or ''}"

    def check(self) -> None:
        """Connect and run the request path's reads once; raises
        ``ConfigError`` naming the option and the database's host when that
        fails (the service's start; also a schema without consumer types)."""
        try:
            self._rows(q.MAX_ALLOCATION_ID)
            self.consumer("00000000-0000-0000-0000-000000000000")
        except errors.PlacementUnavailable as exc:
            raise errors.ConfigError(
                f"[scheduler_ext] {OPTION}: cannot read placement's database "
                f"at {self.where}: {exc}", option=OPTION,
                value=self.where) from exc

    def _rows(self, sql: str, where: str = "", params: dict | None = None):
        try:
            with self._engine.connect() as conn:
                return conn.execute(self._statement(sql + where), params or {}).all()
        except self._sa.exc.SQLAlchemyError as exc:
            raise errors.PlacementDatabaseError(
                f"placement database read failed: {exc.__class__.__name__}: "
                f"{str(exc).splitlines()[0]}") from exc

    def _statement(self, sql: str):
        """The compiled statement for ``sql`` (cached: SQLAlchemy then
        reuses its compilation); ``:uuids`` expands to an IN list."""
        stmt = self._statements.get(sql)
        if stmt is None:
            stmt = self._sa.text(sql)
            if ":uuids" in sql:
                stmt = stmt.bindparams(self._sa.bindparam("uuids", expanding=True))
            self._statements[sql] = stmt
        return stmt

    def _fast(self, sql: str, bound: str | None = None, **numbers: Any) -> list[tuple]:
        """Rows of ``sql`` with ``{name}`` replaced by integers (or comma
        lists of integers), through the driver's own cursor: the request
        path's queries skip SQLAlchemy's parameter and row handling, which
        costs more than the queries themselves. Only ints are inlined; a
        string goes as the one bound parameter ``bound`` (``{bound}`` in
        ``sql`` becomes the driver's placeholder)."""
        fields = {k: ",".join(str(int(i)) for i in v)
                  if isinstance(v, (list, tuple)) else str(int(v))
                  for k, v in numbers.items()}
        params: Any = None
        if bound is not None:
            fields["bound"], params = _PLACEHOLDER[self._engine.dialect.paramstyle]
            params = params(bound)
        text = q.for_dialect(sql.format(**fields), self._engine.dialect.name)
        dbapi_error = self._engine.dialect.loaded_dbapi.Error
        try:
            conn = self._engine.raw_connection()
            try:
                cur = conn.cursor()
                if params is None:   # no formatting: ``%`` stays as written
                    cur.execute(text)
                else:
                    cur.execute(text, params)
                rows = list(cur.fetchall())
                cur.close()
                conn.rollback()   # end the read's transaction
            finally:
                conn.close()      # back to the pool
        except (self._sa.exc.SQLAlchemyError, dbapi_error) as exc:
            raise errors.PlacementDatabaseError(
                f"placement database read failed: {exc.__class__.__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
        return rows

    def dispose(self) -> None:
        """Close pooled connections."""
        self._engine.dispose()

    # ---------------------------------------------------------- change probe
    def allocations_after(self, low: int) -> list[AllocationRow]:
        """Every allocation row with ``id > low``, ascending by id. An index
        range scan on the primary key: O(rows returned)."""
        return self._fast(q.ALLOCATIONS_AFTER, low=low)

    def allocations_in(self, low: int, high: int, buckets: Iterable[int],
                       bucket: int) -> list[AllocationRow]:
        """The allocation rows with ``low < id <= high`` in the checksum
        ``buckets`` (ids rounded down to a multiple of ``bucket``),
        ascending by id: O(high - low) rows scanned by the server."""
        wanted = sorted(set(buckets))
        if not wanted:
            return []
        return self._fast(q.ALLOCATIONS_IN, low=low, high=high, buckets=wanted,
                          bucket=bucket)

    def provider_ids(self, uuids: Iterable[str]) -> list[int]:
        """Database ids of the providers ``uuids`` (unknown ones left out)."""
        wanted = sorted(set(uuids))
        return [r[0] for r in self._rows(q.IDS_OF, "", {"uuids": wanted})] if wanted else []

    def max_allocation_id(self) -> int:
        """The largest allocation id (0 when there is none)."""
        return int(self._rows(q.MAX_ALLOCATION_ID)[0][0] or 0)

    def consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        """What ``consumer_uuid`` holds, with its generation, project, user
        and type, as GET /allocations/{consumer} shows it (microversion
        1.38+; empty when it holds nothing): one indexed statement."""
        consumer_uuid = validation.uuid(consumer_uuid, "consumer_uuid")
        rows = self._fast(q.CONSUMER, bound=consumer_uuid)
        if not rows:
            return ConsumerAllocations({})
        held: dict[str, dict[str, int]] = collections.defaultdict(dict)
        for rp, rc_id, used, *_ in rows:
            held[rp][self._name("classes", rc_id)] = int(used)
        *_, generation, project, user, type_id = rows[0]
        kind = q.UNKNOWN_CONSUMER_TYPE if type_id is None else self._name("consumer_types", type_id)
        return ConsumerAllocations(dict(held), int(generation), project, user, kind)

    # ------------------------------------------------------------ bulk reads
    def generations(self) -> dict[str, int]:
        """uuid -> generation of every provider."""
        return {u: g for _, u, g in self._rows(q.GENERATIONS)}

    def provider_table(self) -> list[tuple[int, str, int]]:
        """(database id, uuid, generation) of every provider."""
        return [tuple(r) for r in self._rows(q.GENERATIONS)]

    def usage_rows(self) -> list[tuple[str, str, int]]:
        """(uuid, class, used) for every provider and class in use."""
        return [(u, rc, int(used)) for u, rc, used in self._rows(q.USAGES, q.USAGES_GROUP)]

    def snapshot(self, uuids: Iterable[str] | None = None) -> FleetSnapshot:
        """Every provider (or only ``uuids``; unknown ones are left out),
        with inventories, usages, traits and aggregates. Usage of classes
        without inventory is left out, as placement's own usages call
        does. Costs O(fleet) for all, O(len(uuids)) for a part."""
        if uuids is None:
            return self._everything()
        return self.records(self.provider_ids(uuids))

    def records(self, ids: Iterable[int]) -> FleetSnapshot:
        """The providers with database ids ``ids`` (see ``snapshot``): one
        statement of indexed reads (one round trip), whatever the fleet
        size."""
        wanted = sorted(set(ids))
        if not wanted:
            return FleetSnapshot(())
        return FleetSnapshot(tuple(self._decode(self._fast(q.DETAILS_OF, ids=wanted))[0]))

    def usage_of(self, ids: Iterable[int]) -> dict[int, dict[str, int]]:
        """Provider database id -> class -> used, for those of ``ids`` that
        still exist (``{}``: nothing used); one statement."""
        out: dict[int, dict[str, int]] = {}
        wanted = sorted(set(ids))
        for rp, rc, used in self._fast(q.USAGE_OF, ids=wanted) if wanted else ():
            held = out.setdefault(rp, {})
            if rc is not None:
                held[self._name("classes", rc)] = int(used)
        return out

    def poll_after(self, high: int, low: int, bucket: int) -> tuple[
            list[AllocationRow], TailSums, dict[int, dict[str, int]]]:
        """One statement: the allocation rows with ``id > high`` (ascending),
        the checksum of those in ``(low, high]`` per bucket of ``bucket``
        ids and the usage (provider id -> class -> used) of the providers
        the former name.
        O(rows above ``high``, their providers' rows, ``high - low``)."""
        fresh: list[AllocationRow] = []
        sums: TailSums = {}
        usage: dict[int, dict[str, int]] = {}
        classes = self._names["classes"]
        sql = q.POLL_PG if self._engine.dialect.name == "postgresql" else q.POLL
        for kind, a, b, c, d, e in self._fast(sql, high=high, low=low, bucket=bucket):
            if kind == 3:
                rc = classes.get(b)
                if rc is None:
                    rc = self._name("classes", b)
                if a in usage:
                    usage[a][rc] = int(c)
                else:
                    usage[a] = {rc: int(c)}
            elif kind == 5:
                fresh.append((a, b, c, d, e))
            else:
                sums[int(a)] = (int(b), int(c))
        fresh.sort()
        return fresh, sums, usage

    def _decode(self, rows: list[tuple]) -> tuple[list[ProviderRecord], list[tuple]]:
        """Records from ``DETAILS_OF``'s rows (a provider without its
        kind-4 row is left out: deleted meanwhile), and the rows of other
        kinds, untouched."""
        invs: dict[int, dict[str, Inventory]] = collections.defaultdict(dict)
        traits: dict[int, set[str]] = collections.defaultdict(set)
        aggs: dict[int, set[str]] = collections.defaultdict(set)
        used: dict[int, dict[str, int]] = collections.defaultdict(dict)
        provs, extra = [], []
        classes, name = self._names["classes"], self._name
        for row in rows:
            kind, rp_id, ref = row[0], row[1], row[2]
            if kind == 0:
                rc = classes.get(ref) or name("classes", ref)
                invs[rp_id][rc] = Inventory(row[3], row[4], row[5], row[6], row[7],
                                            float(row[8]))
            elif kind == 3:
                used[rp_id][classes.get(ref) or name("classes", ref)] = int(row[3])
            elif kind == 4:
                provs.append(row)
            elif kind == 1:
                traits[rp_id].add(name("traits", ref))
            elif kind == 2:
                aggs[rp_id].add(name("aggregates", ref))
            else:
                extra.append(row)
        out = []
        for row in provs:
            rp_id, u = row[1], row[9]
            inv, use = invs[rp_id], used.get(rp_id, {})
            out.append(ProviderRecord(
                Provider(u, row[10], row[2], row[11] or u, row[12]), inv,
                {rc: use.get(rc, 0) for rc in inv},
                frozenset(traits[rp_id]), frozenset(aggs[rp_id])))
        return out, extra

    def _name(self, table: str, ref: int) -> str:
        """The name of row ``ref`` of a small name table (cached; re-read
        when a row is new)."""
        names = self._names[table]
        if ref not in names:
            names.update((int(i), n) for i, n in self._rows(q.NAMES[table]))
        return names[ref]

    def _everything(self) -> FleetSnapshot:
        # the name tables too, so that a poll on the request path resolves
        # every class, trait and aggregate that existed at start from the
        # cache (reading one there cost about 3 ms, once)
        for table, sql in q.NAMES.items():
            self._names[table].update((int(i), n) for i, n in self._rows(sql))
        provs = self._rows(q.PROVIDERS)
        invs: dict[int, dict[str, Inventory]] = collections.defaultdict(dict)
        for rp_id, rc, total, reserved, lo, hi, step, ratio in self._rows(q.INVENTORIES):
            invs[rp_id][rc] = Inventory(total, reserved, lo, hi, step, ratio)
        traits: dict[int, set[str]] = collections.defaultdict(set)
        for rp_id, name in self._rows(q.TRAITS):
            traits[rp_id].add(name)
        aggs: dict[int, set[str]] = collections.defaultdict(set)
        for rp_id, agg in self._rows(q.AGGREGATES):
            aggs[rp_id].add(agg)
        used: dict[str, dict[str, int]] = collections.defaultdict(dict)
        for u, rc, n in self.usage_rows():
            used[u][rc] = n
        return FleetSnapshot(tuple(
            ProviderRecord(
                Provider(u, name, gen, root or u, parent),
                invs[rp_id],
                {rc: used.get(u, {}).get(rc, 0) for rc in invs[rp_id]},
                frozenset(traits[rp_id]), frozenset(aggs[rp_id]))
            for rp_id, u, name, gen, root, parent in provs))
