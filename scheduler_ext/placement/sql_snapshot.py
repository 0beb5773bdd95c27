"""Read the fleet straight from placement's database (read-only).

Placement has no bulk read endpoint: over its API a snapshot costs four
GETs per provider (tens of minutes at 50k providers). Its database answers
the same question in a few queries. This reader needs SQLAlchemy and a
database driver for the URL (the one placement itself uses), and a
read-only account is enough: it never writes.

Besides full and partial snapshots it offers the cheap change probe the
fleet view polls before each decision: the newest rows of ``allocations``
by id (``allocations_after``), an index range scan whose cost follows the
number of rows written, not the fleet. Every allocation write deletes the
consumer's rows and inserts new ones, so each write that adds usage shows
up there as new ids (see ``sources/sql_changes.py`` for why this, and not
provider or consumer generations, is the probe).
"""

from __future__ import annotations

import collections
from typing import Any, Iterable

from scheduler_ext import errors
from scheduler_ext.placement.model import (FleetSnapshot, Inventory, Provider,
                                           ProviderRecord)

OPTION = "placement_database_connection"

_PROVIDERS = """
SELECT rp.id, rp.uuid, rp.name, rp.generation, root.uuid, parent.uuid
FROM resource_providers rp
LEFT JOIN resource_providers root ON root.id = rp.root_provider_id
LEFT JOIN resource_providers parent ON parent.id = rp.parent_provider_id
"""
_GENERATIONS = "SELECT uuid, generation FROM resource_providers"
_INVENTORIES = """
SELECT i.resource_provider_id, rc.name, i.total, i.reserved, i.min_unit,
       i.max_unit, i.step_size, i.allocation_ratio
FROM inventories i JOIN resource_classes rc ON rc.id = i.resource_class_id
"""
_USAGES = """
SELECT rp.uuid, rc.name, SUM(a.used)
FROM allocations a
JOIN resource_providers rp ON rp.id = a.resource_provider_id
JOIN resource_classes rc ON rc.id = a.resource_class_id
"""
_USAGES_GROUP = " GROUP BY rp.uuid, rc.name"
_TRAITS = """
SELECT rpt.resource_provider_id, t.name
FROM resource_provider_traits rpt JOIN traits t ON t.id = rpt.trait_id
"""
_AGGREGATES = """
SELECT rpa.resource_provider_id, pa.uuid
FROM resource_provider_aggregates rpa
JOIN placement_aggregates pa ON pa.id = rpa.aggregate_id
"""
_ALLOCATIONS_AFTER = """
SELECT a.id, rp.uuid, a.consumer_id, a.resource_class_id, a.used
FROM allocations a JOIN resource_providers rp ON rp.id = a.resource_provider_id
WHERE a.id > :low
"""
_MAX_ALLOCATION_ID = "SELECT MAX(id) FROM allocations"

#: One allocation row as the change probe sees it:
#: (id, provider uuid, consumer uuid, resource class id, used).
AllocationRow = tuple[int, str, str, int, int]


def _in_list(column: str, prefix: str, values: list) -> tuple[str, dict]:
    names = [f"{prefix}{i}" for i in range(len(values))]
    return (f" WHERE {column} IN ({', '.join(':' + n for n in names)})",
            dict(zip(names, values)))


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
        try:
            self._url = sqlalchemy.engine.make_url(url)
            self._engine = sqlalchemy.create_engine(url)
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
        """Connect and read once; raises ``ConfigError`` naming the option
        and the database's host when that fails (the service's start)."""
        try:
            self._rows(_MAX_ALLOCATION_ID)
        except errors.PlacementUnavailable as exc:
            raise errors.ConfigError(
                f"[scheduler_ext] {OPTION}: cannot read placement's database "
                f"at {self.where}: {exc}", option=OPTION,
                value=self.where) from exc

    def _rows(self, sql: str, where: str = "", params: dict | None = None):
        try:
            with self._engine.connect() as conn:
                return conn.execute(self._sa.text(sql + where), params or {}).all()
        except self._sa.exc.SQLAlchemyError as exc:
            raise errors.PlacementUnavailable(
                f"placement database read failed: {exc.__class__.__name__}: "
                f"{str(exc).splitlines()[0]}") from exc

    def dispose(self) -> None:
        """Close pooled connections."""
        self._engine.dispose()

    # ---------------------------------------------------------- change probe
    def allocations_after(self, low: int) -> list[AllocationRow]:
        """Every allocation row with ``id > low``, ascending by id. An index
        range scan on the primary key: O(rows returned)."""
        rows = self._rows(_ALLOCATIONS_AFTER, "", {"low": int(low)})
        return sorted((int(i), u, c, int(rc), int(n)) for i, u, c, rc, n in rows)

    def max_allocation_id(self) -> int:
        """The largest allocation id (0 when there is none)."""
        return int(self._rows(_MAX_ALLOCATION_ID)[0][0] or 0)

    # ------------------------------------------------------------ bulk reads
    def generations(self) -> dict[str, int]:
        """uuid -> generation of every provider."""
        return {u: g for u, g in self._rows(_GENERATIONS)}

    def usage_rows(self, uuids: Iterable[str] | None = None
                   ) -> list[tuple[str, str, int]]:
        """(uuid, class, used) for every provider and class in use, or only
        for the providers ``uuids``."""
        where, params = "", dict[str, Any]()
        if uuids is not None:
            wanted = sorted(set(uuids))
            if not wanted:
                return []
            where, params = _in_list("rp.uuid", "u", wanted)
        return [(u, rc, int(used)) for u, rc, used in
                self._rows(_USAGES, where + _USAGES_GROUP, params)]

    def usages(self, uuids: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """uuid -> class -> used, for every provider with allocations (or
        only the providers ``uuids``)."""
        out: dict[str, dict[str, int]] = collections.defaultdict(dict)
        for u, rc, used in self.usage_rows(uuids):
            out[u][rc] = used
        return dict(out)

    def snapshot(self, uuids: Iterable[str] | None = None) -> FleetSnapshot:
        """Every provider (or only ``uuids``; unknown ones are left out),
        with inventories, usages, traits and aggregates. Usage of classes
        without inventory is left out, as placement's own usages call
        does. Costs O(fleet) for all, O(len(uuids)) for a part."""
        where, params = "", dict[str, Any]()
        if uuids is not None:
            wanted = sorted(set(uuids))
            if not wanted:
                return FleetSnapshot(())
            where, params = _in_list("rp.uuid", "u", wanted)
        provs = self._rows(_PROVIDERS, where, params)
        if not provs:
            return FleetSnapshot(())
        by_id: tuple[str, dict[str, Any]] = ("", {})
        if uuids is not None:
            by_id = _in_list("resource_provider_id", "i", sorted(r[0] for r in provs))
        invs: dict[int, dict[str, Inventory]] = collections.defaultdict(dict)
        for rp_id, rc, total, reserved, lo, hi, step, ratio in \
                self._rows(_INVENTORIES, *by_id):
            invs[rp_id][rc] = Inventory(total, reserved, lo, hi, step, ratio)
        traits: dict[int, set[str]] = collections.defaultdict(set)
        for rp_id, name in self._rows(_TRAITS, *by_id):
            traits[rp_id].add(name)
        aggs: dict[int, set[str]] = collections.defaultdict(set)
        for rp_id, agg in self._rows(_AGGREGATES, *by_id):
            aggs[rp_id].add(agg)
        used = self.usages(None if uuids is None else [r[1] for r in provs])
        return FleetSnapshot(tuple(
            ProviderRecord(
                Provider(u, name, gen, root or u, parent),
                invs[rp_id],
                {rc: used.get(u, {}).get(rc, 0) for rc in invs[rp_id]},
                frozenset(traits[rp_id]), frozenset(aggs[rp_id]))
            for rp_id, u, name, gen, root, parent in provs))
