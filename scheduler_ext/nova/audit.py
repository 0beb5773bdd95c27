"""What ``scheduler-ext audit`` reads from nova, through nova's objects:
every instance of every cell as the reconcile sees it
(``reconcile.instance_state``: live flavor, compute node, resizes and cold
migrations), and every consumer nova knows (instances and their
migrations), so that a placement consumer nova does not know stands out.
"""

from __future__ import annotations

import dataclasses

from nova import config as nova_config
from nova import context as nova_context
from nova import objects

from scheduler_ext.moves.reconcile import InstanceState
from scheduler_ext.nova.reconcile import instance_state


@dataclasses.dataclass(frozen=True)
class NovaView:
    """``instances``: the InstanceStates the reconcile may act on;
    ``known``: every instance (deleted ones excepted) and migration uuid
    nova has; ``left_alone``: instances skipped (a task running, a move
    being confirmed, ...)."""

    instances: tuple[InstanceState, ...]
    known: frozenset[str]
    left_alone: tuple[str, ...]


def admin_context(config_files: list[str]):
    """nova's configuration from ``config_files`` (databases included, no
    RPC) and an admin context."""
    argv = ["scheduler-ext-audit"]
    for path in config_files:
        argv += ["--config-file", path]
    nova_config.parse_args(argv, init_rpc=False)
    objects.register_all()
    return nova_context.get_admin_context()


def read(context) -> NovaView:
    """Every cell's instances and migrations (cell0's instances are known
    but never reconciled: they never ran)."""
    objects.register_all()
    states: list[InstanceState] = []
    known: set[str] = set()
    left: list[str] = []
    for cell in objects.CellMappingList.get_all(context):
        with nova_context.target_cell(context, cell) as cctxt:
            uuids = [i.uuid for i in objects.InstanceList.get_by_filters(
                cctxt, {"deleted": False}, expected_attrs=[])]
            known.update(uuids)
            if cell.is_cell0():
                continue
            live = set(uuids)
            for m in objects.MigrationList.get_by_filters(cctxt, {}):
                if m.instance_uuid in live:
                    known.add(m.uuid)
            for uuid in sorted(uuids):
                state = instance_state(cctxt, uuid)
                if state is None:
                    left.append(uuid)
                else:
                    states.append(state)
    return NovaView(tuple(states), frozenset(known), tuple(left))
