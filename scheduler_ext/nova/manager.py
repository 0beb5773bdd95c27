"""The scheduler service manager for nova >= 23.

``SchedulerManager`` is nova's own ``SchedulerManager`` with
``select_destinations`` answered by the scheduler-ext driver named by
``[scheduler_ext] driver`` (stevedore namespace ``scheduler_ext.driver``):
same RPC API, same topic, same nova.conf, so it replaces ``nova-scheduler``
one for one (run it with ``scheduler-ext-nova-scheduler``). Everything else
(aggregate and instance info updates, host discovery, SIGHUP reset) is
nova's.

It adds one periodic task, ``reconcile_moves``, every
``[scheduler_ext] reconcile_interval`` seconds (0 disables it): the
instances whose resize or cold-migration records changed since the last
run are brought back to the move invariants (a confirmed or reverted
same-host resize is trimmed to the live flavor, a migration consumer left
holding allocations after its move ended is emptied).

Requests scheduler-ext does not model (see ``request.UseNova``) go to
nova's own code path unchanged.
"""

from __future__ import annotations

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_serialization import jsonutils
from oslo_service import periodic_task

import nova.conf
from nova import exception
from nova import objects
from nova.scheduler import manager as nova_manager

from scheduler_ext import errors
from scheduler_ext.nova import service
from scheduler_ext.nova.request import UseNova
from scheduler_ext.nova.scheduler import public_reason

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

class SchedulerManager(nova_manager.SchedulerManager):
    """nova's scheduler manager, choosing and claiming with scheduler-ext."""

    # set by oslo.service's PeriodicTasks metaclass on nova's manager
    _periodic_tasks: list
    _periodic_spacing: dict

    def __init__(self, *args, **kwargs):
        service.register_opts(CONF)
        super().__init__(*args, **kwargs)
        self.ext = service.ExtService(self.host_manager)
        self._add_reconcile_task(CONF.scheduler_ext.reconcile_interval)

    # ------------------------------------------------------------ set-up
    def _add_reconcile_task(self, interval: int) -> None:
        """Register ``reconcile_moves`` on this instance with the
        configured spacing (oslo.service reads the spacing from the task
        when it is added, so it cannot be a class decorator evaluated before
        the configuration is parsed)."""
        if interval <= 0:
            LOG.info("periodic reconcile disabled ([scheduler_ext] "
                     "reconcile_interval = %s)", interval)
            return

        def reconcile_moves(self, context):
            self.reconcile_moves(context)

        task = periodic_task.periodic_task(
            spacing=interval, run_immediately=False,
            name="reconcile_moves")(reconcile_moves)
        # instance copies: other managers of the class are not affected
        self._periodic_tasks = list(self._periodic_tasks) + [
            ("reconcile_moves", task)]
        self._periodic_spacing = dict(self._periodic_spacing,
                                      reconcile_moves=interval)
        self._periodic_last_run["reconcile_moves"] = task._periodic_last_run

    # ------------------------------------------------------------- RPC API
    @messaging.expected_exceptions(exception.NoValidHost)
    def select_destinations(
        self, context, request_spec=None, filter_properties=None,
        spec_obj=nova_manager.SchedulerManager._sentinel, instance_uuids=None,
        return_objects=False, return_alternates=False,
    ):
        """Same contract as nova's: per instance a list of Selections, the
        claimed host first, then ``[scheduler] max_attempts - 1``
        alternates when both ``return_objects`` and ``return_alternates``
        are set; legacy host dicts when ``return_objects`` is False."""
        if spec_obj is self._sentinel:
            spec_obj = objects.RequestSpec.from_primitives(
                context, request_spec, filter_properties)
        num_alts = (CONF.scheduler.max_attempts - 1
                    if return_objects and return_alternates else 0)
        try:
            scheduler = self.ext.scheduler()
        except errors.SchedulerExtError as exc:
            LOG.error("scheduler-ext cannot start its driver: %s", exc)
            raise exception.NoValidHost(reason=public_reason(exc))
        try:
            selections = scheduler.select(
                context, spec_obj, instance_uuids, num_alts)
        except UseNova as why:
            LOG.info("scheduling %s with nova's own code: %s",
                     instance_uuids, why)
            return super().select_destinations(
                context, spec_obj=spec_obj, instance_uuids=instance_uuids,
                return_objects=return_objects,
                return_alternates=return_alternates)
        if not return_objects:
            return jsonutils.to_primitive([s[0].to_dict() for s in selections])
        return selections

    # ------------------------------------------------------------ periodic
    def reconcile_moves(self, context) -> list:
        """One reconcile run over the recently moved instances; returns the
        fixes (applied or not, see ``nova.reconcile.reconcile``)."""
        return self.ext.reconcile_moves(context)
