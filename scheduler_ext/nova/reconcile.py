"""The reconcile's view of nova: instance states read through nova's
objects, and the fixes applied to placement.

Every ``[scheduler_ext] reconcile_interval`` seconds the scheduler service
reads the instances whose resize or cold-migration records changed since
its last run (``moved_instance_states``) and reconciles them
(``reconcile``).
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Iterable

from oslo_log import log as logging
from oslo_utils import timeutils

from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler import utils as sched_utils

from scheduler_ext import errors
from scheduler_ext.moves.reconcile import Fix, InstanceState, MoveState, Reconciler
from scheduler_ext.nova.request import MOVE_TYPES
from scheduler_ext.placement import PlacementClient, allocations

LOG = logging.getLogger(__name__)

#: Migration statuses after which nova no longer touches the allocations.
FINISHED = frozenset({"confirmed", "reverted", "error", "failed", "done",
                      "completed", "cancelled"})
#: The one stable status of a move still in progress: resized, awaiting
#: confirm or revert (VERIFY_RESIZE).
AWAITING_CONFIRM = "finished"
#: Instance states the periodic reconcile may touch (with no task running).
#: ERROR is included for a failed same-host move only (see
#: ``instance_state``): the instance is trimmed to the flavor nova's record
#: gives it, as nova's own code leaves it when prep_resize or
#: resize_instance failed (nova keeps the new flavor's allocations after a
#: finish_resize failure although it resets the record to the old flavor).
QUIET_VM_STATES = frozenset({"active", "stopped", "resized", "paused",
                             "suspended", "error"})
#: How far back the first reconcile run after a start looks for moves.
FIRST_LOOKBACK = datetime.timedelta(days=1)
#: Overlap between runs, so a record written while a run was reading is
#: seen again by the next one.
OVERLAP = datetime.timedelta(minutes=1)


def _node_uuid(cctxt, host: str | None, node: str | None) -> str | None:
    if not host or not node:
        return None
    try:
        return objects.ComputeNode.get_by_host_and_nodename(cctxt, host, node).uuid
    except exception.ComputeHostNotFound:
        return None


def moved_elsewhere(m) -> bool:
    """The migration chose a destination other than its source node."""
    return bool(m.dest_compute) and (m.dest_compute, m.dest_node) != (
        m.source_compute, m.source_node)


def instance_state(cctxt, instance_uuid: str) -> InstanceState | None:
    """The reconcile view of one instance of the targeted cell, or None when
    it must be left alone.

    Left alone: a deleted instance or one without a host; a task running
    (``task_state`` set); a move being confirmed; an instance in ERROR whose
    last move went to another host (nova's own accounting applies there,
    and scheduler-ext's writes are the same as nova's on another host).

    A move still awaiting confirmation (status ``finished``, instance
    RESIZED) is in progress. Every other move is over: finished by nova, or
    dead (a record left ``pre-migrating`` or ``migrating`` by a failure while
    the instance has no task running). The migrations are read before the
    instance: a move that starts in between shows a task state.
    """
    migrations = sorted(
        (m for m in objects.MigrationList.get_by_filters(
            cctxt, {"instance_uuid": instance_uuid})
         if m.migration_type in MOVE_TYPES), key=lambda m: m.id)
    try:
        inst = objects.Instance.get_by_uuid(cctxt, instance_uuid,
                                            expected_attrs=["flavor"])
    except exception.InstanceNotFound:
        return None
    if inst.deleted or inst.task_state is not None or \
            inst.vm_state not in QUIET_VM_STATES:
        return None
    if inst.vm_state == "error" and migrations and \
            moved_elsewhere(migrations[-1]):
        return None
    host = _node_uuid(cctxt, inst.host, inst.node)
    if host is None:
        return None
    moves = _move_states(cctxt, inst, migrations)
    if moves is None:
        return None
    return InstanceState(
        uuid=inst.uuid, host=host,
        resources=sched_utils.resources_from_flavor(inst, inst.flavor),
        project_id=inst.project_id, user_id=inst.user_id,
        moves=tuple(moves))


def _move_states(cctxt, inst, migrations: list) -> list[MoveState] | None:
    """The MoveStates of ``inst``'s migrations (oldest first), or None when
    the instance must be left alone (a move being confirmed, or one not
    understood). Only the last move of a RESIZED instance is in progress."""
    moves = []
    resized = inst.vm_state == "resized"
    for i, m in enumerate(migrations):
        if not resized or i < len(migrations) - 1:
            if not resized and m.status not in FINISHED:
                LOG.debug("migration %s of instance %s left %r; the instance "
                          "has no task running: the move is over", m.uuid,
                          inst.uuid, m.status)
            moves.append(MoveState(m.uuid, "", "", {}, {}, False))
            continue
        if m.status != AWAITING_CONFIRM or not inst.old_flavor or \
                not inst.new_flavor:
            return None         # being confirmed, or not understood
        source = _node_uuid(cctxt, m.source_compute, m.source_node)
        dest = _node_uuid(cctxt, m.dest_compute, m.dest_node)
        if source is None or dest is None:
            return None
        moves.append(MoveState(
            m.uuid, source, dest,
            sched_utils.resources_from_flavor(inst, inst.old_flavor),
            sched_utils.resources_from_flavor(inst, inst.new_flavor),
            in_progress=True))
    if resized and not any(m.in_progress for m in moves):
        return None
    return moves


def moved_instance_states(context, since: datetime.datetime) -> list[InstanceState]:
    """InstanceStates of the instances whose resize or cold-migration
    records changed since ``since``, across every cell."""
    out = []
    for cell in objects.CellMappingList.get_all(context):
        if cell.is_cell0():
            continue
        with nova_context.target_cell(context, cell) as cctxt:
            changed = objects.MigrationList.get_by_filters(
                cctxt, {"changes-since": since})
            uuids = dict.fromkeys(m.instance_uuid for m in changed
                                  if m.migration_type in MOVE_TYPES)
            for uuid in uuids:
                state = instance_state(cctxt, uuid)
                if state is not None:
                    out.append(state)
    return out


def reconcile(client: PlacementClient, states: Iterable[InstanceState],
              apply: bool = True) -> list[Fix]:
    """Plan (and apply) the reconcile fixes of ``states``.

    A fix is only applied when every consumer it rewrites holds nothing
    but resource classes of the instance's flavors: allocations made for a
    port, an accelerator or a PCI device in placement are outside what the
    flavor says and are never rewritten from it.
    """
    reconciler = Reconciler(client)
    fixes = []
    for state in states:
        fix = reconciler.plan(state)
        if fix is None:
            continue
        allowed = set(state.resources)
        for move in state.moves:
            allowed |= set(move.old_resources) | set(move.new_resources)
        foreign = set()
        for consumer in fix.writes:
            foreign |= allocations.classes(client.get_consumer(consumer).allocations) - allowed
        if foreign:
            LOG.warning("reconcile of instance %s skipped: it holds %s, which "
                        "its flavor does not give (%s)", state.uuid,
                        sorted(foreign), fix.reason)
            fixes.append(dataclasses.replace(
                fix, error=f"holds {sorted(foreign)} outside its flavor"))
            continue
        if apply:
            try:
                client.post_allocations(fix.writes)
                fix = dataclasses.replace(fix, applied=True)
                LOG.info("reconciled instance %s: %s", state.uuid, fix.reason)
            except errors.PlacementError as exc:
                LOG.warning("reconcile of instance %s not applied: %s",
                            state.uuid, exc)
                fix = dataclasses.replace(fix, error=str(exc))
        fixes.append(fix)
    return fixes


def utcnow() -> datetime.datetime:
    return timeutils.utcnow()


def reconcile_since(started: datetime.datetime,
                    last: datetime.datetime | None) -> datetime.datetime:
    """Where a reconcile run starting at ``started`` looks back to, given
    the start of the last completed run (None: the first run)."""
    return last - OVERLAP if last is not None else started - FIRST_LOOKBACK
