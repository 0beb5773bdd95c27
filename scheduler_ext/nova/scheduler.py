"""``NovaScheduler``: select_destinations for nova on top of a scheduler-ext
driver.

One call:

1. nova's request filters run on a copy of the RequestSpec (so a request we
   hand back to nova's own code is untouched; ``working_copy``), the
   minimum ``nova-compute`` version they ask for answered from the host
   states' mirror (``compute_version``);
2. nova's placement query for the spec becomes our query
   (``request.parse_query``);
3. a resize or cold migration is recognised by its ``pre-migrating``
   Migration record (``request.find_move``), looked for only when the
   conductor sent a ``requested_destination`` (``request.may_be_move``);
   that look-up and the driver's refresh start on worker threads as the
   call arrives, beside steps 1 and 2 (``early_reads``);
4. our driver chooses and claims, its candidates ranked per call by nova's
   host filters and weighers (``ranking.NovaRanking``);
5. the claimed host and the alternates become nova ``Selection`` objects
   carrying the allocation request the conductor claims on a reschedule.

Rebuilds, evacuations (the instance still holds its allocations: placement
refuses the claim for a new consumer, and nothing is written), calls
from conductors older than Queens and queries our type cannot express
raise ``UseNova``; the caller then runs nova's own code unchanged.
"""

from __future__ import annotations

import copy
import datetime
import functools
import threading
from typing import Any

from oslo_log import log as logging
from oslo_utils import timeutils

from nova.compute import utils as compute_utils
from nova import exception
from nova import objects
from nova.objects import fields as obj_fields
from nova import rpc
from nova.scheduler import request_filter
from nova.scheduler import utils as sched_utils

from scheduler_ext import errors
from scheduler_ext.driver import Driver
from scheduler_ext.moves.request import ScheduleRequest
from scheduler_ext.nova import compute_version
from scheduler_ext.nova import request as nova_request
from scheduler_ext.nova.early_reads import EarlyReads
from scheduler_ext.nova.garbage import DeferredDrop
from scheduler_ext.nova.host_state_view import MirroredHostManager
from scheduler_ext.nova.ranking import NovaRanking
from scheduler_ext.nova.request import ALLOCATION_REQUEST_VERSION, UseNova
from scheduler_ext.nova.workers import Workers
from scheduler_ext.placement import PlacementClient
from scheduler_ext.sources.base import Candidate

LOG = logging.getLogger(__name__)


#: RequestSpec fields a decision only reads (nova's request filters, its
#: placement query, host filters and weighers, a host state's consumption,
#: the notifications); the working copy shares them with the original
SHARED_FIELDS = ("flavor", "image")


def working_copy(spec_obj):
    """The copy of ``spec_obj`` a decision changes (nova's request filters,
    the instance's uuid, what each claim consumes), so that a request
    handed back to nova's own code is untouched. It is ``obj_clone()``'s
    deep copy except for ``SHARED_FIELDS``, which are the original's
    objects: copying the flavor and the image took most of the clone's
    0.7 to 0.9 ms a call in the end-to-end benchmark."""
    memo: dict[int, Any] = {}
    for name in SHARED_FIELDS:
        value = getattr(spec_obj, name) if spec_obj.obj_attr_is_set(name) else None
        if value is not None:
            memo[id(value)] = value     # deepcopy hands these back as they are
    return copy.deepcopy(spec_obj, memo)


def public_reason(exc: Exception) -> str:
    """The NoValidHost reason users see (the details go to the log only,
    as nova keeps its own reasons general)."""
    if isinstance(exc, errors.PlacementUnavailable):
        return "The placement service is unavailable."
    return "There are not enough hosts available."


def host_limit(limit: int | None, driver: Driver) -> int | None:
    """How many hosts nova's filters see: placement's limit, lowered to
    ``[scheduler_ext] nova_host_limit`` when that is set. Never applied when
    nova wants every candidate (no limit: server groups, a targeted host)."""
    cap = driver.conf.scheduler_ext.nova_host_limit
    return min(limit, cap) if cap and limit else limit


class NovaScheduler:
    """select_destinations for nova, on top of a scheduler-ext driver
    (``scheduler_ext.driver.SchedulerDriver`` or another plugin of the
    ``scheduler_ext.driver`` namespace, see ``driver.Driver``)."""

    def __init__(self, driver: Driver, host_manager, client: PlacementClient):
        self.driver = driver
        self.host_manager = host_manager
        self.client = client
        self.lock = threading.Lock()
        #: run each call's early refreshes and move look-up (``early_reads``)
        self.early = Workers("scheduler-ext-early-reads", 3)
        self.notifier = rpc.get_notifier("scheduler")
        #: drops each call's HostStates after its answer (see ``garbage``)
        self.drop = DeferredDrop()
        if isinstance(host_manager, MirroredHostManager):
            compute_version.install()

    def select(self, context, spec_obj, instance_uuids, num_alts: int) -> list[list]:
        """Per instance: the claimed nova Selection, then up to ``num_alts``
        alternates in the same cell. Raises NoValidHost (nothing left
        claimed) or UseNova (nothing written)."""
        if not instance_uuids:
            raise UseNova("no instance uuids (a conductor older than Queens)")
        if sched_utils.request_is_rebuild(spec_obj):
            raise UseNova("a rebuild checks the current host only")
        admin = context.elevated()
        arrived = timeutils.utcnow()
        spec = working_copy(spec_obj)
        # after the clone (all CPU), so that the reads overlap the request
        # filters' waits on nova's databases rather than contend with it
        early = self._early_reads(admin, spec_obj, list(instance_uuids))
        try:
            with compute_version.answered_by(early.compute_version):
                request_filter.process_reqspec(context, spec)
        except exception.RequestFilterFailed as exc:
            raise exception.NoValidHost(reason=exc.message)
        query = nova_request.parse_query(
            nova_request.placement_query(context, spec, self.host_manager))
        used: list = []     # this call's NovaRanking, dropped after the answer
        try:
            with early.turn(self.lock):
                return self._select(context, admin, spec, list(instance_uuids),
                                    query, num_alts, early, used, arrived)
        except errors.SchedulerExtError as exc:   # placement unreachable...
            LOG.error("scheduling %s failed: %s", instance_uuids, exc)
            raise exception.NoValidHost(reason=public_reason(exc))
        finally:
            self.drop.later(used)

    def _early_reads(self, admin, spec_obj, instance_uuids: list[str]) -> EarlyReads:
        """Start the driver's refresh and, for a single instance that may be
        moving, its move look-up (on the spec as the conductor sent it:
        the request filters touch neither its cell nor ``ignore_hosts``)."""
        find_move = (functools.partial(
            nova_request.find_move, admin, instance_uuids[0], spec_obj,
            self.driver.read_consumer, self.driver.holder_root)
            if len(instance_uuids) == 1 and nova_request.may_be_move(spec_obj)
            else None)
        # every cell, disabled ones too: nova's minimum compute version
        # counts them (``compute_version``)
        host_states = functools.partial(
            self.host_manager.view.refresh_cells, admin,
            list(self.host_manager.cells.values())) \
            if isinstance(self.host_manager, MirroredHostManager) else None
        return EarlyReads(self.early, self.driver.refresh, find_move, host_states)

    @staticmethod
    def _requests(admin, spec, instance_uuids: list[str], query,
                  early: EarlyReads) -> list[ScheduleRequest]:
        """One request per instance. An instance that already holds
        allocations without a resize or cold migration (an evacuation) is
        found by its claim, which placement refuses for a new consumer
        (``_claim`` then hands the request to nova)."""
        move = early.move()
        return [nova_request.schedule_request(query, uuid, spec, admin, move)
                for uuid in instance_uuids]

    def _select(self, context, admin, spec, instance_uuids: list[str], query,
                num_alts: int, early: EarlyReads, used: list,
                arrived: datetime.datetime) -> list[list]:
        requests = self._requests(admin, spec, instance_uuids, query, early)
        ranking = NovaRanking(admin, spec, self.host_manager,
                              host_limit(query.limit, self.driver), arrived,
                              on_columns=not self.driver.conf.scheduler_ext.nova_host_limit)
        used.append(ranking)
        self._notify(context, spec, "start")
        claimed: list[tuple[str, list[Candidate], Any]] = []
        try:
            for index, request in enumerate(requests):
                uuid = request.instance_uuids[0]
                spec.instance_uuid = uuid
                spec.obj_reset_changes(["instance_uuid"])
                ranking.index = index
                cands = self._claim(ranking, request, num_alts, early)
                host = ranking.state(cands[0].root)
                claimed.append((uuid, cands, host))
                self._consume(host, spec, uuid, cands[0])
        except Exception:
            for uuid, _, _ in claimed:
                if requests[0].move is None:
                    self._undo_boot(uuid)
            for _, _, host in claimed:
                host.updated = None     # re-read from the database next time
            raise
        self._notify(context, spec, "end")
        taken = {host.uuid for _, _, host in claimed}
        return [_nova_selections(ranking, cands, host, num_alts, taken)
                for _, cands, host in claimed]

    def _claim(self, ranking: NovaRanking, request: ScheduleRequest,
               num_alts: int, early: EarlyReads) -> list[Candidate]:
        uuid = request.instance_uuids[0]
        try:
            return self.driver.select_destinations(
                request, num_alts, ranking, refreshed=early.refreshed())[0]
        except errors.NoValidHost as exc:
            LOG.info("no valid host for instance %s: %s", uuid, exc)
            raise exception.NoValidHost(
                reason="There are not enough hosts available.")
        except errors.Unsupported as exc:
            raise UseNova(f"the engine cannot answer: {exc}") from exc
        except errors.ConsumerExists as exc:
            raise UseNova(f"{exc} (no resize or cold migration is being "
                          "scheduled: an evacuation)") from exc
        except errors.SchedulerExtError as exc:
            LOG.error("scheduling instance %s failed: %s", uuid, exc)
            raise exception.NoValidHost(reason=public_reason(exc))

    def _undo_boot(self, instance_uuid: str) -> None:
        try:
            self.client.delete_allocations(instance_uuid)
        except errors.NotFound:
            pass
        except errors.PlacementError as exc:
            LOG.error("could not undo the boot claimed for instance %s: %s",
                      instance_uuid, exc)

    @staticmethod
    def _consume(host, spec, instance_uuid: str, claimed: Candidate) -> None:
        """What nova does after each claim of a multi-create: the request
        groups take the providers of the claimed allocation request (the
        host state's PCI devices tracked in placement are consumed by that
        mapping), the host state consumes the flavor and server groups learn
        the host."""
        mappings = claimed.mappings or {}
        for rg in (spec.requested_resources if "requested_resources" in spec
                   else None) or ():
            if rg.requester_id in mappings:
                rg.provider_uuids = list(mappings[rg.requester_id])
        host.consume_from_request(spec)
        group = spec.instance_group
        if group is None:
            return
        group.hosts.append(host.host)
        group.obj_reset_changes(["hosts"])
        host.instances.setdefault(instance_uuid,
                                  objects.Instance(uuid=instance_uuid))

    def _notify(self, context, spec, phase: str) -> None:
        self.notifier.info(context, f"scheduler.select_destinations.{phase}",
                           {"request_spec": spec.to_legacy_request_spec_dict()})
        compute_utils.notify_about_scheduler_action(
            context=context, request_spec=spec,
            action=obj_fields.NotificationAction.SELECT_DESTINATIONS,
            phase=getattr(obj_fields.NotificationPhase, phase.upper()))


def _nova_selections(ranking: NovaRanking, cands: list[Candidate], host,
                     num_alts: int, taken: set[str]) -> list:
    """nova Selections: the claimed host, then alternates of its cell."""
    out = [objects.Selection.from_host_state(
        host, allocation_request=nova_request.allocation_request(cands[0]),
        allocation_request_version=ALLOCATION_REQUEST_VERSION)]
    for cand in cands[1:]:
        if len(out) > num_alts:
            break
        alt = ranking.state(cand.root)
        if alt is None or cand.root in taken or \
                alt.cell_uuid != host.cell_uuid:
            continue
        out.append(objects.Selection.from_host_state(
            alt, allocation_request=nova_request.allocation_request(cand),
            allocation_request_version=ALLOCATION_REQUEST_VERSION))
    return out
