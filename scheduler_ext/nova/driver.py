"""The scheduler driver for nova <= 22 (Victoria and earlier).

Those releases load ``[scheduler] driver`` from the ``nova.scheduler.driver``
entry-point namespace and build it without arguments; this package
registers ``scheduler_ext`` there::

    [scheduler]
    driver = scheduler_ext

``USES_ALLOCATION_CANDIDATES`` is False: nova's manager then skips its own
``GET /allocation_candidates`` (and its NoValidHost when placement returns
none, which is where nova bug 1790204 bites) and calls
``select_destinations`` with ``alloc_reqs_by_rp_uuid`` and
``provider_summaries`` set to None. The driver runs nova's request filters,
host filters and weighers itself on the hosts scheduler-ext's engine
returns (``adapter.NovaScheduler``), claims, and returns per instance the
claimed ``Selection`` first, then the alternates with their allocation
requests. Requests scheduler-ext does not model are handed to nova's
``FilterScheduler`` with the candidates placement gives, as nova would have.

nova 22 does not import on Python 3.11; this class is tested against a
stand-in of the 22.x base class (see README, "Using it with nova").
"""

from __future__ import annotations

import threading
import time

from oslo_log import log as logging

import nova.conf
from nova import exception
from nova.scheduler import driver as nova_driver

from scheduler_ext import errors
from scheduler_ext.nova import adapter

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)


class SchedulerExtDriver(nova_driver.Scheduler):
    """``nova.scheduler.driver`` entry point ``scheduler_ext``."""

    USES_ALLOCATION_CANDIDATES = False

    def __init__(self):
        adapter.register_opts(CONF)
        super().__init__()
        self._lock = threading.Lock()
        self._ext_scheduler = None
        self._stock = None
        self._next_reconcile = (time.monotonic() +
                                CONF.scheduler_ext.reconcile_interval)
        self._reconciled_until = None

    def _scheduler(self) -> adapter.NovaScheduler:
        with self._lock:
            if self._ext_scheduler is None:
                client = adapter.placement_client(CONF)
                self._ext_scheduler = adapter.NovaScheduler(
                    adapter.load_driver(client), self.host_manager, client)
            return self._ext_scheduler

    def select_destinations(self, context, spec_obj, instance_uuids,
                            alloc_reqs_by_rp_uuid, provider_summaries,
                            allocation_request_version=None,
                            return_alternates=False):
        num_alts = CONF.scheduler.max_attempts - 1 if return_alternates else 0
        try:
            try:
                scheduler = self._scheduler()
            except errors.SchedulerExtError as exc:
                LOG.error("scheduler-ext cannot start its driver: %s", exc)
                raise exception.NoValidHost(reason=adapter.public_reason(exc))
            return scheduler.select(context, spec_obj, instance_uuids,
                                    num_alts)
        except adapter.UseNova as why:
            LOG.info("scheduling %s with nova's FilterScheduler: %s",
                     instance_uuids, why)
            return self._nova(context, spec_obj, instance_uuids,
                              return_alternates)
        finally:
            # a release whose manager no longer calls run_periodic_tasks
            # still gets the reconcile, on the next call once it is due
            try:
                self.run_periodic_tasks(context)
            except Exception:
                LOG.exception("periodic reconcile failed")

    def _nova(self, context, spec_obj, instance_uuids, return_alternates):
        """What nova's manager would have done with its FilterScheduler."""
        if self._stock is None:
            from nova.scheduler import filter_scheduler  # nova <= 22 only
            self._stock = filter_scheduler.FilterScheduler()
        if adapter.sched_utils.request_is_rebuild(spec_obj):
            by_rp = summaries = version = None
        else:
            by_rp, summaries, version = adapter.placement_candidates(
                context, spec_obj, self.host_manager,
                self._stock.placement_client)
        return self._stock.select_destinations(
            context, spec_obj, instance_uuids, by_rp, summaries, version,
            return_alternates)

    def run_periodic_tasks(self, context):
        """Runs the reconcile once ``[scheduler_ext] reconcile_interval``
        seconds have passed since the last run (0 disables it). Called by
        nova's manager where the release still has that hook, and after
        every select_destinations call."""
        interval = CONF.scheduler_ext.reconcile_interval
        if interval <= 0 or time.monotonic() < self._next_reconcile:
            return
        self._next_reconcile = time.monotonic() + interval
        self.reconcile_moves(context)

    def reconcile_moves(self, context) -> list:
        started = adapter.utcnow()
        since = adapter.reconcile_since(started, self._reconciled_until)
        ext = self._scheduler()
        fixes = adapter.reconcile(
            ext.client, adapter.moved_instance_states(context.elevated(), since))
        self._reconciled_until = started
        return fixes
