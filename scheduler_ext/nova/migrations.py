"""The Migration record a resize or cold migration is being scheduled for,
read with one statement on nova's cell database.

nova's own path to it (``MigrationList.get_by_filters``) builds an ORM
query, loads a model and coerces thirty versioned-object fields for a row
of which we need three: 2.5 ms of CPU per resize (p50, end-to-end
benchmark at 990 hosts, nova's database on PostgreSQL), on a scheduler
whose other per-decision work is a few milliseconds. This reads the same
row with one statement built at import, on a connection of nova's own
reader engine for the cell (its pool, pre-ping and soft-delete
convention), through the driver's cursor: 0.25 to 0.3 ms of CPU. The
``migrations_instance_uuid_and_status_idx`` index of nova's schema
answers it.
"""

from __future__ import annotations

from typing import NamedTuple

import sqlalchemy as sa

try:
    from nova.db.main import api as main_db
    from nova.db.main import models
except ImportError:     # older releases (the nova <= 22 driver) keep them here
    from nova.db.sqlalchemy import api as main_db
    from nova.db.sqlalchemy import models

#: ``status`` of a migration the conductor has created but not yet
#: scheduled (``MigrationTask._preallocate_migration``)
PRE_MIGRATING = "pre-migrating"


class PendingMigration(NamedTuple):
    """What scheduling a move needs of its Migration record."""
    uuid: str
    source_compute: str
    source_node: str


def _statement() -> sa.Select:
    table = models.Migration.__table__
    return (sa.select(table.c.uuid, table.c.source_compute, table.c.source_node)
            .where(table.c.deleted == 0,
                   table.c.instance_uuid == sa.bindparam("instance_uuid"),
                   table.c.status == PRE_MIGRATING,
                   table.c.migration_type.in_(sa.bindparam("types", expanding=True)))
            .order_by(table.c.id.desc())
            .limit(1))


_STATEMENT = _statement()

#: per dialect, paramstyle and types: the statement's text for the
#: driver's own cursor, and its parameters' names and values in order
_TEXTS: dict[tuple[str, str, tuple[str, ...]], tuple[str, list[str], dict]] = {}


def _text(dialect, types: tuple[str, ...]) -> tuple[str, list[str], dict]:
    key = (dialect.name, dialect.paramstyle, types)
    got = _TEXTS.get(key)
    if got is None:
        compiled = _STATEMENT.params(types=list(types), instance_uuid="").compile(
            dialect=dialect, compile_kwargs={"render_postcompile": True})
        names = list(compiled.positiontup or ()) if compiled.positional else []
        got = _TEXTS[key] = (str(compiled), names, dict(compiled.params))
    return got


def pending_migration(cell_context, instance_uuid: str,
                      types: tuple[str, ...]) -> PendingMigration | None:
    """The instance's newest ``pre-migrating``, not deleted Migration of
    one of ``types`` in the cell ``cell_context`` targets
    (``nova.context.target_cell``), or None. Read through a connection of
    the pool of nova's reader engine for the cell (its pre-ping included),
    with the driver's own cursor: SQLAlchemy's statement execution cost
    0.3 to 0.4 ms of the read's 0.6 ms of CPU."""
    engine = main_db.get_context_manager(cell_context).reader.get_engine()
    text, names, values = _text(engine.dialect, types)
    values = dict(values, instance_uuid=instance_uuid)
    params = [values[n] for n in names] if names else values
    conn = engine.raw_connection()
    try:
        cursor = conn.cursor()
        cursor.execute(text, params)
        row = cursor.fetchone()
        cursor.close()
        conn.rollback()     # end the read's transaction
    finally:
        conn.close()        # back to the pool
    return PendingMigration(*row) if row is not None else None
