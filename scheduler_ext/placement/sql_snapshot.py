"""Read the fleet straight from placement's database (read-only).

Placement has no bulk read endpoint: over its API a snapshot costs four
GETs per provider (tens of minutes at 50k providers). Its database answers
the same question in a few queries. This reader needs SQLAlchemy and a
database driver for the URL (the one placement itself uses), and a
read-only account is enough: it never writes.

A refresh reads every provider's generation (one narrow query) and
re-reads inventories, traits and aggregates only of the providers whose
generation moved; usage is re-read for all, in one aggregate query,
because placement does not bump a provider's generation when allocations
leave it (DELETE /allocations, or a consumer's allocations replaced by ones
elsewhere).
"""

from __future__ import annotations

import collections
from typing import Any, Iterable

from scheduler_ext import errors
from scheduler_ext.placement.model import (FleetSnapshot, Inventory, Provider,
                                           ProviderRecord)

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
GROUP BY rp.uuid, rc.name
"""
_TRAITS = """
SELECT rpt.resource_provider_id, t.name
FROM resource_provider_traits rpt JOIN traits t ON t.id = rpt.trait_id
"""
_AGGREGATES = """
SELECT rpa.resource_provider_id, pa.uuid
FROM resource_provider_aggregates rpa
JOIN placement_aggregates pa ON pa.id = rpa.aggregate_id
"""


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
            self._engine = sqlalchemy.create_engine(url)
        except Exception as exc:
            raise errors.InvalidRequest(
                f"placement database URL is not usable: {exc}",
                field="placement_database_connection", value="<hidden>") from exc

    def _rows(self, sql: str, where: str = "", params: dict | None = None):
        try:
            with self._engine.connect() as conn:
                return conn.execute(self._sa.text(sql + where), params or {}).all()
        except self._sa.exc.SQLAlchemyError as exc:
            raise errors.PlacementUnavailable(
                f"placement database read failed: {exc.__class__.__name__}: "
                f"{str(exc).splitlines()[0]}") from exc

    def generations(self) -> dict[str, int]:
        """uuid -> generation of every provider."""
        return {u: g for u, g in self._rows(_GENERATIONS)}

    def usage_rows(self) -> list[tuple[str, str, int]]:
        """(uuid, class, used) for every provider and class in use."""
        return [(u, rc, int(used)) for u, rc, used in self._rows(_USAGES)]

    def usages(self) -> dict[str, dict[str, int]]:
        """uuid -> class -> used, for every provider with allocations."""
        out: dict[str, dict[str, int]] = collections.defaultdict(dict)
        for u, rc, used in self.usage_rows():
            out[u][rc] = used
        return dict(out)

    def snapshot(self, uuids: Iterable[str] | None = None) -> FleetSnapshot:
        """Every provider (or only ``uuids``), with inventories, usages,
        traits and aggregates. Usage of classes without inventory is left
        out, as placement's own usages call does."""
        where, params = "", {}
        if uuids is not None:
            wanted = sorted(set(uuids))
            if not wanted:
                return FleetSnapshot(())
            names = [f"u{i}" for i in range(len(wanted))]
            where = f" WHERE rp.uuid IN ({', '.join(':' + n for n in names)})"
            params = dict(zip(names, wanted))
        provs = self._rows(_PROVIDERS, where, params)
        ids = {row[0] for row in provs}
        by_id: tuple[str, dict[str, Any]] = ("", {})
        if uuids is not None:
            names = [f"i{i}" for i in range(len(ids))]
            by_id = (f" WHERE resource_provider_id IN "
                     f"({', '.join(':' + n for n in names)})",
                     dict(zip(names, sorted(ids))))
        invs: dict[int, dict[str, Inventory]] = collections.defaultdict(dict)
        for rp_id, rc, total, reserved, lo, hi, step, ratio in \
                self._rows(_INVENTORIES, *by_id) if ids else ():
            invs[rp_id][rc] = Inventory(total, reserved, lo, hi, step, ratio)
        traits: dict[int, set[str]] = collections.defaultdict(set)
        for rp_id, name in self._rows(_TRAITS, *by_id) if ids else ():
            traits[rp_id].add(name)
        aggs: dict[int, set[str]] = collections.defaultdict(set)
        for rp_id, agg in self._rows(_AGGREGATES, *by_id) if ids else ():
            aggs[rp_id].add(agg)
        used = self.usages()
        return FleetSnapshot(tuple(
            ProviderRecord(
                Provider(u, name, gen, root or u, parent),
                invs[rp_id],
                {rc: used.get(u, {}).get(rc, 0) for rc in invs[rp_id]},
                frozenset(traits[rp_id]), frozenset(aggs[rp_id]))
            for rp_id, u, name, gen, root, parent in provs))
