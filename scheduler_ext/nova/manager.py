"""The scheduler service manager for nova >= 23.

``SchedulerManager`` is nova's own ``SchedulerManager`` with
``select_destinations`` answered by the scheduler-ext driver named by
``[scheduler_ext] driver`` (stevedore namespace ``scheduler_ext.driver``):
same RPC API, same topic, same nova.conf, so it replaces ``nova-scheduler``
one for one (run it with ``scheduler-ext-nova-scheduler``). Everything else
(aggregate and instance info updates, host discovery, SIGHUP reset) is
nova's.

It adds the change-driven reconcile (``service.ExtService``): started with
the service, a run every ``[scheduler_ext] reconcile_interval`` seconds
(0 disables it) over the instances whose resize or cold-migration records
changed since the last complete run, and at once for an instance whose
resize nova's versioned notifications say ended. It brings them back to
the move invariants (a confirmed or reverted same-host resize is trimmed
to the live flavor, a migration consumer left holding allocations after
its move ended is emptied). It runs whether or not nova's own periodic
tasks are enabled: it bounds how long placement over-holds.

Its HostManager takes the candidates' host states from a mirror of the
cells' compute node and service rows refreshed by what changed
(``host_state_view``), not from a read of every candidate per request,
and runs nova's filters on arrays (``vector_filtering``).

Requests scheduler-ext does not model (see ``request.UseNova``) go to
nova's own code path unchanged.
"""

from __future__ import annotations

from oslo_log import log as logging
import oslo_messaging as messaging
from oslo_serialization import jsonutils

import nova.conf
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler import manager as nova_manager

from scheduler_ext import errors
from scheduler_ext.nova import host_state_view, notifications, service
from scheduler_ext.nova.request import UseNova
from scheduler_ext.nova.scheduler import public_reason
from scheduler_ext.nova.vector_filtering import VectorFilterHandler

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

class SchedulerManager(nova_manager.SchedulerManager):
    """nova's scheduler manager, choosing and claiming with scheduler-ext."""

    def __init__(self, *args, **kwargs):
        service.register_opts(CONF)
        super().__init__(*args, **kwargs)
        host_state_view.mirror_host_states(
            self.host_manager, CONF.scheduler_ext.host_state_refresh_interval)
        # nova's get_filtered_hosts (ignore, force, requested destination)
        # stays nova's; its filter loop runs the filters on arrays
        self.host_manager.filter_handler = VectorFilterHandler()
        # nova's report client: the one its own scheduler manager uses
        self.ext = service.ExtService(self.host_manager,
                                      lambda: self.placement_client)
        self._listener = None

    # ------------------------------------------------------- life cycle
    def post_start_hook(self):
        super().post_start_hook()
        if isinstance(self.host_manager, host_state_view.MirroredHostManager):
            # the cells' rows and host states, built before the heap is frozen
            self.host_manager.view.read_cells(nova_context.get_admin_context(),
                                              self.host_manager.enabled_cells)
        self.ext.start()
        self.ext.start_reconcile()
        if CONF.scheduler_ext.reconcile_interval > 0:
            self._listener = notifications.start_listener(
                CONF, self.ext.tracker)

    def _stop_reconcile(self) -> None:
        """Signal the loop to stop, without waiting: a reconcile run in
        flight ends on its own (each of its writes is one atomic,
        generation-guarded write), and nova's own shutdown steps are not
        delayed."""
        self.ext.stop_reconcile(timeout=0)

    def _stop_listener(self) -> None:
        """Stop the notification listener (about 50 ms: oslo.messaging
        waits for its poll). Done after nova's own shutdown step, which must
        not wait for it (nova's functional harness patches the process-wide
        executor shutdown only for as long as a service's own stop takes)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()

    def graceful_shutdown(self, timeout):
        """nova 2025.2+ stops a service's manager through this hook."""
        self._stop_reconcile()
        super().graceful_shutdown(timeout)
        self._stop_listener()

    def cleanup_host(self):
        """Older releases stop a service's manager through this hook."""
        self._stop_reconcile()
        super().cleanup_host()
        self._stop_listener()

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

    # ----------------------------------------------------------- reconcile
    def reconcile_moves(self, context) -> dict[str, str]:
        """One reconcile run now (what the loop runs): the outcome per
        instance worked on (``moves.tracker.DONE`` or ``RETRY``)."""
        return self.ext.reconcile_moves(context)
