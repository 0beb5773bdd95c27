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
returns (``scheduler.NovaScheduler``), claims, and returns per instance the
claimed ``Selection`` first, then the alternates with their allocation
requests. Requests scheduler-ext does not model are handed to nova's
``FilterScheduler`` with the candidates placement gives, as nova would have.

nova 22 does not import on Python 3.11; this class is tested against a
stand-in of the 22.x base class (see README, "Using it with nova").
"""

from __future__ import annotations

from oslo_log import log as logging

import nova.conf
from nova import exception
from nova.scheduler import driver as nova_driver
from nova.scheduler import request_filter
from nova.scheduler import utils as sched_utils

from scheduler_ext import errors
from scheduler_ext.nova import service
from scheduler_ext.nova.request import UseNova
from scheduler_ext.nova.scheduler import public_reason

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)


class SchedulerExtDriver(nova_driver.Scheduler):
    """``nova.scheduler.driver`` entry point ``scheduler_ext``."""

    USES_ALLOCATION_CANDIDATES = False

    def __init__(self):
        service.register_opts(CONF)
        super().__init__()
        self.ext = service.ExtService(self.host_manager)
        self._stock = None
        # 22.x's manager has no start hook for its driver: the fleet read
        # and the reconcile loop start with the driver
        self.ext.start()
        self.ext.start_reconcile()

    def select_destinations(self, context, spec_obj, instance_uuids,
                            alloc_reqs_by_rp_uuid, provider_summaries,
                            allocation_request_version=None,
                            return_alternates=False):
        num_alts = CONF.scheduler.max_attempts - 1 if return_alternates else 0
        try:
            try:
                scheduler = self.ext.scheduler()
            except errors.SchedulerExtError as exc:
                LOG.error("scheduler-ext cannot start its driver: %s", exc)
                raise exception.NoValidHost(reason=public_reason(exc))
            return scheduler.select(context, spec_obj, instance_uuids,
                                    num_alts)
        except UseNova as why:
            LOG.info("scheduling %s with nova's FilterScheduler: %s",
                     instance_uuids, why)
            return self._nova(context, spec_obj, instance_uuids,
                              return_alternates)

    def _nova(self, context, spec_obj, instance_uuids, return_alternates):
        """What nova's manager would have done with its FilterScheduler."""
        if self._stock is None:
            from nova.scheduler import filter_scheduler  # nova <= 22 only
            self._stock = filter_scheduler.FilterScheduler()
        if sched_utils.request_is_rebuild(spec_obj):
            by_rp = summaries = version = None
        else:
            by_rp, summaries, version = placement_candidates(
                context, spec_obj, self.host_manager,
                self._stock.placement_client)
        return self._stock.select_destinations(
            context, spec_obj, instance_uuids, by_rp, summaries, version,
            return_alternates)

    def reconcile_moves(self, context) -> dict[str, str]:
        """One reconcile run now (see ``service.ExtService.reconcile_moves``)."""
        return self.ext.reconcile_moves(context)


def placement_candidates(context, spec_obj, host_manager, report_client):
    """What nova <= 22's manager would have passed a driver using
    allocation candidates: (alloc_reqs_by_rp_uuid, provider_summaries,
    allocation_request_version). Used to hand a request back to nova's
    FilterScheduler. Raises NoValidHost when placement has none."""
    request_filter.process_reqspec(context, spec_obj)
    resources = sched_utils.resources_from_request_spec(
        context, spec_obj, host_manager)
    answer = report_client.get_allocation_candidates(context, resources)
    alloc_reqs, summaries, version = answer or (None, None, None)
    if not alloc_reqs:
        raise exception.NoValidHost(reason="")
    by_rp: dict[str, list] = {}
    for ar in alloc_reqs:
        for rp in ar["allocations"]:
            by_rp.setdefault(rp, []).append(ar)
    return by_rp, summaries, version
