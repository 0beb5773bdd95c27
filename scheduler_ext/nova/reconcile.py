"""The reconcile's view of nova: which instances changed, their states
read through nova's objects, and the run that reconciles them.

The scheduler service runs ``run`` every ``[scheduler_ext]
reconcile_interval`` seconds and whenever a notification says a resize
ended: the instances whose resize or cold-migration records changed since
the tracker's watermark (one indexed query on each cell's ``migrations``
table, ``updated_at``), those a notification named, and those whose retry
is due (``moves.tracker``). The rules are ``moves.reconcile``'s, the same
as the CLI's.
"""

from __future__ import annotations

import datetime
from typing import Hashable

from oslo_log import log as logging
from oslo_utils import timeutils

from nova.compute import instance_actions
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler import utils as sched_utils

from scheduler_ext.moves import tracker as tr
from scheduler_ext.moves.reconcile import InstanceState, MoveState, Reconciler
from scheduler_ext.nova.request import MOVE_TYPES

LOG = logging.getLogger(__name__)

#: Migration statuses after which nova no longer touches the allocations.
FINISHED = frozenset({"confirmed", "reverted", "error", "failed", "done",
                      "completed", "cancelled"})
#: The one stable status of a move still in progress: resized, awaiting
#: confirm or revert (VERIFY_RESIZE).
AWAITING_CONFIRM = "finished"
#: Statuses of a move whose finish step cannot have failed: resized
#: (awaiting confirm or revert), confirmed, reverted.
SETTLED = frozenset({"confirmed", "reverted", "finished"})
#: nova's instance action event of a resize's or cold migration's last
#: step, on the destination.
FINISH_EVENT = "compute_finish_resize"
#: A finish step started longer ago than this with no result was cut short
#: (a compute that died, then a reset-state): no longer waited for.
FINISH_STALE = datetime.timedelta(minutes=10)
#: Instance states the reconcile may touch (with no task running).
#: ERROR is included for a failed same-host move only (see
#: ``instance_state``).
QUIET_VM_STATES = frozenset({"active", "stopped", "resized", "paused",
                             "suspended", "error"})


class Busy(Exception):
    """The instance cannot be reconciled now (a task is running, a move is
    being confirmed): retry later."""


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

    Left alone (None): a deleted instance or one without a host; an
    instance in ERROR whose last move went to another host (nova's own
    accounting applies there, and scheduler-ext's writes are the same as
    nova's on another host). ``Busy`` (retry later): a task running
    (``task_state`` set), a move being confirmed, a failed move whose
    finish step nova is still handling. The flavor to hold is
    ``_target_flavor``'s.

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
    if inst.deleted:
        return None
    if inst.task_state is not None:
        raise Busy(f"task {inst.task_state} running")
    if inst.vm_state not in QUIET_VM_STATES:
        return None
    if inst.vm_state == "error" and migrations and \
            moved_elsewhere(migrations[-1]):
        return None
    host = _node_uuid(cctxt, inst.host, inst.node)
    if host is None:
        return None
    moves = _move_states(cctxt, inst, migrations)
    if moves is None:
        raise Busy("its last move is being confirmed or not understood yet")
    return InstanceState(
        uuid=inst.uuid, host=host,
        resources=sched_utils.resources_from_flavor(
            inst, _target_flavor(cctxt, inst, migrations)),
        project_id=inst.project_id, user_id=inst.user_id,
        moves=tuple(moves))


def _target_flavor(cctxt, inst, migrations: list):
    """The flavor ``inst`` must hold: its record's, except after a
    same-host move that failed in its finish step, where nova keeps the new
    flavor's allocations (the guest's disk was already resized, and a hard
    reboot recovers it on this host) although it resets the record to the
    old flavor. After a failure before that step (prep_resize,
    resize_instance) nova's target is the record's old flavor. ``Busy``
    while nova still handles the failure."""
    if migrations and migrations[-1].status not in SETTLED and \
            not moved_elsewhere(migrations[-1]):
        finish = _finish_result(cctxt, inst.uuid)
        if finish == "":
            raise Busy("nova is still handling the failure of its resize")
        if finish == "Error" and inst.new_flavor:
            return inst.new_flavor
    return inst.flavor


def _finish_result(cctxt, instance_uuid: str) -> str | None:
    """The result nova recorded for the finish step (``FINISH_EVENT``) of
    the instance's latest resize or cold migration: ``"Error"``,
    ``"Success"``, ``""`` while the step (or nova's handling of its
    failure) still runs, None when the move never got there or the step
    was cut short (``FINISH_STALE``)."""
    moving = (instance_actions.RESIZE, instance_actions.MIGRATE)
    for action in objects.InstanceActionList.get_by_instance_uuid(
            cctxt, instance_uuid):          # newest first
        if action.action not in moving:
            continue
        for event in objects.InstanceActionEventList.get_by_action(
                cctxt, action.id):
            if event.event != FINISH_EVENT:
                continue
            if event.result:
                return event.result
            started = _naive(event.start_time) if event.start_time else None
            return "" if started and utcnow() - started < FINISH_STALE \
                else None
        return None
    return None


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


def changed_instances(context, since: datetime.datetime
                      ) -> dict[str, tr.Change]:
    """{instance uuid: its latest Change} of the instances whose resize or
    cold-migration records changed since ``since``, across every cell (one
    query per cell on the migrations' ``updated_at``). The Change's
    ``where`` is the cell's uuid, its ``mark`` the uuid and status of each
    of the instance's migrations changed at that time (``updated_at`` is
    whole seconds on MySQL: a confirm in the same second as ``finished``
    differs by its status only)."""
    latest: dict[str, tuple[Hashable, datetime.datetime, set]] = {}
    for cell in objects.CellMappingList.get_all(context):
        if cell.is_cell0():
            continue
        with nova_context.target_cell(context, cell) as cctxt:
            for m in objects.MigrationList.get_by_filters(
                    cctxt, {"changes-since": since}):
                if m.migration_type not in MOVE_TYPES:
                    continue
                when = _naive(m.updated_at or m.created_at)
                seen = latest.get(m.instance_uuid)
                if seen is None or when > seen[1]:
                    latest[m.instance_uuid] = seen = (cell.uuid, when, set())
                if when == seen[1]:
                    seen[2].add((m.uuid, m.status))
    return {uuid: tr.Change(where, when, tuple(sorted(mark)))
            for uuid, (where, when, mark) in latest.items()}


def _naive(when: datetime.datetime) -> datetime.datetime:
    return when.replace(tzinfo=None) if when.tzinfo else when


def _cell_of(context, instance_uuid: str, where: Hashable):
    if where is not None:
        return objects.CellMapping.get_by_uuid(context, where)
    return objects.InstanceMapping.get_by_instance_uuid(
        context, instance_uuid).cell_mapping


def reconcile_instance(context, reconciler: Reconciler, instance_uuid: str,
                       where: Hashable) -> str:
    """Reconcile one instance; its outcome (``tracker.DONE`` or
    ``tracker.RETRY``). nova's state is read, then placement's, then
    nova's again before writing: a move that started meanwhile makes it
    a retry. Never raises: any failure is logged and retried."""
    try:
        cell = _cell_of(context, instance_uuid, where)
        with nova_context.target_cell(context, cell) as cctxt:
            state = instance_state(cctxt, instance_uuid)
            if state is None:
                return tr.DONE
            fix = reconciler.reconcile_one(
                state, apply=True,
                recheck=lambda planned: _still(cctxt, planned))
    except Busy as why:
        LOG.debug("reconcile of instance %s later: %s", instance_uuid, why)
        return tr.RETRY
    except exception.InstanceMappingNotFound:
        return tr.DONE
    except Exception:
        LOG.exception("reconcile of instance %s failed; retrying later",
                      instance_uuid)
        return tr.RETRY
    return tr.DONE if fix is None or fix.applied else tr.RETRY


def _still(cctxt, planned: InstanceState) -> bool:
    """nova's state of the instance is still ``planned`` (read again)."""
    try:
        return instance_state(cctxt, planned.uuid) == planned
    except Busy:
        return False


def run(context, reconciler: Reconciler, tracker: tr.ReconcileTracker
        ) -> dict[str, str]:
    """One change-driven reconcile run (module docstring); the outcome per
    instance worked on."""
    started = utcnow()
    changed = changed_instances(context, tracker.since(started))
    work = tracker.work(changed)
    outcomes = {uuid: reconcile_instance(context, reconciler, uuid, where)
                for uuid, where in work.items()}
    tracker.finish(started, outcomes, work, changed)
    retry = [u for u, o in outcomes.items() if o == tr.RETRY]
    if retry:
        LOG.info("reconcile: %d of %d instances to retry: %s", len(retry),
                 len(outcomes), ", ".join(sorted(retry)))
    return outcomes


def utcnow() -> datetime.datetime:
    """Now, naive UTC (nova's ``updated_at`` convention)."""
    return _naive(timeutils.utcnow())
