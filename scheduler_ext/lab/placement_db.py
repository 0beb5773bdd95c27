"""Fill a real placement's database directly, through placement's own
table objects: loading a large fleet over HTTP is slow on sqlite (about
180 ms per provider), so benchmarks and tests load 10k+ providers this way
after one API call made the service create the standard traits and
classes."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

from scheduler_ext.engine.fleet.columnar import ColumnarFleet


def load_placement_db(url: str, fleet: ColumnarFleet) -> None:
    """Fill a placement database (schema synced, standard traits and classes
    created by the running service; ``url`` an SQLAlchemy URL or an sqlite
    file path) with ``fleet``: providers, inventories, aggregates, traits,
    and one consumer per provider holding its usage."""
    import sqlalchemy as sa
    from placement.db.sqlalchemy import models

    engine = sa.create_engine(url if "://" in url else f"sqlite:///{url}")
    tables = {m.__tablename__: m.__table__ for m in (
        models.ResourceProvider, models.Inventory, models.Allocation,
        models.PlacementAggregate, models.ResourceProviderAggregate,
        models.ResourceProviderTrait, models.Trait, models.ResourceClass,
        models.Project, models.User, models.Consumer)}
    with engine.begin() as conn:
        ids = _providers(sa, conn, tables, fleet)
        _inventories_and_usage(sa, conn, tables, fleet, ids)
        _aggregates(sa, conn, tables, fleet, ids)
        _traits(sa, conn, tables, fleet, ids)
        if engine.dialect.name == "postgresql":
            # rows were given explicit ids: move the sequences past them so
            # placement's own inserts do not collide
            for table in ("resource_providers", "placement_aggregates"):
                conn.execute(sa.text(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT COALESCE(MAX(id), 1) FROM {table}))"))
    if engine.dialect.name == "postgresql":
        # planner statistics, as autovacuum keeps them on a live database
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("ANALYZE"))
    engine.dispose()


def _providers(sa: Any, conn: Any, T: dict, fleet: ColumnarFleet) -> list[int]:
    """Insert the providers, trees included (``fleet.parents``/``roots``)."""
    base = conn.execute(sa.select(sa.func.max(T["resource_providers"].c.id))).scalar() or 0
    ids = [base + 1 + i for i in range(len(fleet))]
    id_of = dict(zip(fleet.uuids, ids))
    parents = fleet.parents or [None] * len(fleet)
    roots = fleet.roots or list(fleet.uuids)
    conn.execute(T["resource_providers"].insert(), [
        {"id": i, "uuid": u, "name": f"bench-{u}", "generation": 1,
         "root_provider_id": id_of[root], "parent_provider_id": id_of.get(parent or "")}
        for i, u, parent, root in zip(ids, fleet.uuids, parents, roots)])
    return ids


def _inventories_and_usage(sa: Any, conn: Any, T: dict, fleet: ColumnarFleet,
                           ids: list[int]) -> None:
    rc_id = dict(conn.execute(sa.select(T["resource_classes"].c.name,
                                        T["resource_classes"].c.id)).all())
    inv_rows, alloc_rows = [], []
    consumer_of = [str(uuidlib.uuid4()) for _ in ids]
    for rc, ic in fleet.inventories.items():
        for k, row in enumerate(ic.rows.tolist()):
            inv_rows.append({
                "resource_provider_id": ids[row], "resource_class_id": rc_id[rc],
                "total": int(ic.total[k]), "reserved": int(ic.reserved[k]),
                "min_unit": int(ic.min_unit[k]), "max_unit": int(ic.max_unit[k]),
                "step_size": int(ic.step_size[k]),
                "allocation_ratio": float(ic.allocation_ratio[k])})
            if ic.used[k]:
                alloc_rows.append({
                    "resource_provider_id": ids[row], "consumer_id": consumer_of[row],
                    "resource_class_id": rc_id[rc], "used": int(ic.used[k])})
    conn.execute(T["inventories"].insert(), inv_rows)
    if alloc_rows:
        conn.execute(T["allocations"].insert(), alloc_rows)
    pid, uid = (_owner(sa, conn, T[name]) for name in ("projects", "users"))
    owners = sorted({a["consumer_id"] for a in alloc_rows})
    if owners:
        conn.execute(T["consumers"].insert(), [
            {"uuid": c, "project_id": pid, "user_id": uid, "generation": 1}
            for c in owners])


def _owner(sa: Any, conn: Any, table: Any) -> int:
    """The id of the 'bench' project (or user), created on first use."""
    found = conn.execute(sa.select(table.c.id).where(
        table.c.external_id == "bench")).scalar()
    if found is None:
        found = conn.execute(table.insert(), [{"external_id": "bench"}]
                             ).inserted_primary_key[0]
    return int(found)


def _aggregates(sa: Any, conn: Any, T: dict, fleet: ColumnarFleet,
                ids: list[int]) -> None:
    agg_base = conn.execute(sa.select(sa.func.max(
        T["placement_aggregates"].c.id))).scalar() or 0
    agg_ids: dict[str, int] = {}
    for s in fleet.aggregate_sets:
        for a in sorted(s):
            agg_ids.setdefault(a, agg_base + 1 + len(agg_ids))
    if agg_ids:
        conn.execute(T["placement_aggregates"].insert(),
                     [{"id": i, "uuid": a} for a, i in agg_ids.items()])
    members = [{"resource_provider_id": ids[r], "aggregate_id": agg_ids[a]}
               for r, s in enumerate(fleet.aggregate_set_of.tolist())
               for a in fleet.aggregate_sets[s]]
    if members:
        conn.execute(T["resource_provider_aggregates"].insert(), members)


def _traits(sa: Any, conn: Any, T: dict, fleet: ColumnarFleet,
            ids: list[int]) -> None:
    trait_id = dict(conn.execute(sa.select(T["traits"].c.name, T["traits"].c.id)).all())
    tagged = [{"resource_provider_id": ids[r], "trait_id": trait_id[t]}
              for r, s in enumerate(fleet.trait_set_of.tolist())
              for t in fleet.trait_sets[s]]
    if tagged:
        conn.execute(T["resource_provider_traits"].insert(), tagged)


def delete_providers(url: str, uuids: list[str]) -> None:
    """Remove providers (children and parents alike) with everything that
    refers to them: allocations, inventories, traits, aggregate links and
    the consumers left without allocations."""
    import sqlalchemy as sa

    engine = sa.create_engine(url if "://" in url else f"sqlite:///{url}")
    with engine.begin() as conn:
        rp = sa.table("resource_providers", sa.column("id"), sa.column("uuid"),
                      sa.column("parent_provider_id"))
        ids = [r[0] for r in conn.execute(
            sa.select(rp.c.id).where(rp.c.uuid.in_(uuids))).all()]
        for name in ("allocations", "inventories", "resource_provider_traits",
                     "resource_provider_aggregates"):
            t = sa.table(name, sa.column("resource_provider_id"))
            conn.execute(t.delete().where(t.c.resource_provider_id.in_(ids)))
        conn.execute(rp.update().where(rp.c.id.in_(ids)).values(parent_provider_id=None))
        conn.execute(rp.delete().where(rp.c.id.in_(ids)))
        conn.execute(sa.text("DELETE FROM consumers WHERE uuid NOT IN "
                             "(SELECT DISTINCT consumer_id FROM allocations)"))
    engine.dispose()
