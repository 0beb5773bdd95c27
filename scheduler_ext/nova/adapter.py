"""Where nova's objects meet scheduler-ext's.

Every read of a nova object (RequestSpec, Migration, Instance, ComputeNode,
HostState) and every nova object we build (Selection) is in this module;
``manager`` (nova >= 23) and ``driver`` (nova <= 22) only wire it into
nova's service. Below this module everything speaks ``ScheduleRequest``.

One scheduling call (``NovaScheduler.select``):

1. nova's request filters run on a copy of the RequestSpec (so a request we
   hand back to nova's own code is untouched);
2. nova turns the spec into its placement query
   (``utils.resources_from_request_spec``: flavor, extra specs, image
   traits, destination aggregates, ``in_tree`` of a targeted host,
   ``root_required`` such as ``OWNER_NOVA``); the query string is parsed
   into a ``ScheduleRequest`` (``parse_query``);
3. a resize or cold migration is recognised by its ``pre-migrating``
   Migration record in the instance's cell: that gives the migration
   consumer and the source compute node (``find_move``);
4. our driver chooses and claims; its candidates pass through
   ``NovaRankedSource``, which keeps only the hosts nova's enabled host
   filters accept and orders them the way nova's weighers (and
   ``host_subset_size`` / ``shuffle_best_same_weighed_hosts``) do;
5. the claimed host and the alternates become nova ``Selection`` objects
   carrying the allocation request the conductor claims on a reschedule.

Requests our request type cannot express exactly (granular request groups
from ports or accelerators, ``group_policy``, ``same_subtree``, the PCPU
fallback query), rebuilds, evacuations (the instance still holds its
allocations) and calls from conductors older than Queens raise
``UseNova``; the caller then runs nova's own scheduling code unchanged.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import threading
from typing import Any, Iterable, Mapping, Sequence
from urllib import parse

from oslo_log import log as logging
from oslo_utils import timeutils
from stevedore import driver as sd_driver

import nova.conf
from nova.compute import utils as compute_utils
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.objects import fields as obj_fields
from nova import rpc
from nova.scheduler import request_filter
from nova.scheduler import utils as sched_utils

from scheduler_ext import errors
from scheduler_ext.conf import scheduler_ext as se_opts
from scheduler_ext.placement import PlacementClient
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.reconcile import Fix, InstanceState, MoveState, Reconciler
from scheduler_ext.request import MoveContext, ScheduleRequest
from scheduler_ext.strategy import Candidate, MoveCandidates, Selection

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

#: Microversion written into the Selections' ``allocation_request_version``:
#: nova's conductor claims an alternate with it (PUT /allocations). 1.36 is
#: what nova's own scheduler uses; it accepts the ``mappings`` key and does
#: not require ``consumer_type``.
ALLOCATION_REQUEST_VERSION = "1.36"

#: The candidate limit when nova asks placement for every candidate (server
#: groups, a host targeted without its node).
UNLIMITED = 10 ** 9
#: Migration types whose allocations the conductor moves to the migration
#: consumer before it asks the scheduler (``MigrationTask``).
MOVE_TYPES = ("resize", "migration")
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


class UseNova(Exception):
    """Leave this request to nova's own scheduling code (the reason is the
    message); nothing has been written."""


DRIVER_NAMESPACE = "scheduler_ext.driver"
#: How far back the first reconcile run after a start looks for moves.
FIRST_LOOKBACK = datetime.timedelta(days=1)
#: Overlap between runs, so a record written while a run was reading is
#: seen again by the next one.
OVERLAP = datetime.timedelta(minutes=1)


def load_driver(client: PlacementClient, conf=CONF):
    """The driver named by ``[scheduler_ext] driver``, built with
    ``(client, conf)``."""
    name = conf.scheduler_ext.driver
    try:
        return sd_driver.DriverManager(
            DRIVER_NAMESPACE, name, invoke_on_load=True,
            invoke_args=(client, conf)).driver
    except (RuntimeError, ImportError) as exc:
        raise exception.NovaException(
            f"no {DRIVER_NAMESPACE} plugin named {name!r}: {exc}") from exc


def placement_client(conf=CONF) -> HttpPlacement:
    """A placement client from nova.conf's ``[placement]`` section (the
    keystoneauth1 auth, session and adapter options nova itself uses)."""
    if conf.scheduler_ext.placement_backend != "http":
        raise exception.NovaException(
            "[scheduler_ext] placement_backend must be 'http' in a nova "
            "deployment: the embedded placement is for simulations only")
    return HttpPlacement.from_conf(conf, "placement")


def public_reason(exc: Exception) -> str:
    """The NoValidHost reason users see (the details go to the log only,
    as nova keeps its own reasons general)."""
    if isinstance(exc, errors.PlacementUnavailable):
        return "The placement service is unavailable."
    return "There are not enough hosts available."


def register_opts(conf=CONF) -> None:
    """Our ``[scheduler_ext]`` options on nova's configuration (nova
    registers ``[placement]`` itself)."""
    se_opts.register_opts(conf)


# ---------------------------------------------------------------- requests
def parse_query(query: str) -> dict[str, Any]:
    """The fields of a ``ScheduleRequest`` from a ``GET
    /allocation_candidates`` query string with one unsuffixed group.

    Raises UseNova for anything else (suffixed groups, ``group_policy``,
    ``same_subtree``, an unknown parameter).
    """
    out: dict[str, Any] = {
        "resources": {}, "required_traits": set(), "forbidden_traits": set(),
        "any_traits": [], "member_of": [], "forbidden_aggregates": set(),
        "in_tree": None, "root_required": set(), "root_forbidden": set(),
        "limit": None}

    def split(value: str) -> list[str]:
        return [v for v in value.split(",") if v]

    def traits(value: str, required: set, forbidden: set) -> None:
        if value.startswith("in:"):
            out["any_traits"].append(frozenset(split(value[3:])))
            return
        for name in split(value):
            (forbidden if name.startswith("!") else required).add(
                name.lstrip("!"))

    for key, value in parse.parse_qsl(query, keep_blank_values=True):
        if key == "limit":
            out["limit"] = int(value)
        elif key == "resources":
            for item in split(value):
                rc, _, amount = item.partition(":")
                out["resources"][rc] = out["resources"].get(rc, 0) + int(amount)
        elif key == "required":
            traits(value, out["required_traits"], out["forbidden_traits"])
        elif key == "root_required":
            if value.startswith("in:"):
                raise UseNova("any-of root traits are not modelled")
            traits(value, out["root_required"], out["root_forbidden"])
        elif key == "member_of":
            negated = value.startswith("!")
            body = value[1:] if negated else value
            body = body[3:] if body.startswith("in:") else body
            if negated:
                out["forbidden_aggregates"].update(split(body))
            else:
                out["member_of"].append(frozenset(split(body)))
        elif key == "in_tree":
            out["in_tree"] = value
        else:
            raise UseNova(f"placement query parameter {key!r} (granular "
                          "request groups, group_policy or same_subtree) "
                          "is not modelled by scheduler-ext")
    if not out["resources"]:
        raise UseNova("the request asks for no resources")
    return out


def placement_query(context, spec_obj, host_manager) -> str:
    """nova's own placement query for ``spec_obj`` (request filters must
    have run). Raises NoValidHost when a targeted host does not exist."""
    rr = sched_utils.resources_from_request_spec(
        context, spec_obj, host_manager, enable_pinning_translate=True)
    if (getattr(rr, "cpu_pinning_requested", False) and
            not CONF.workarounds.disable_fallback_pcpu_query):
        raise UseNova("pinned CPUs with nova's VCPU fallback query")
    return rr.to_querystring()


def schedule_request(fields: Mapping[str, Any], instance_uuid: str, spec_obj,
                     context, move: MoveContext | None) -> ScheduleRequest:
    """Our request for one instance (UseNova if it does not validate)."""
    user_id = (spec_obj.user_id if "user_id" in spec_obj and spec_obj.user_id
               else context.user_id)
    try:
        return ScheduleRequest(
            instance_uuids=(instance_uuid,),
            resources=dict(fields["resources"]),
            project_id=spec_obj.project_id, user_id=user_id,
            required_traits=frozenset(fields["required_traits"]),
            forbidden_traits=frozenset(fields["forbidden_traits"]),
            any_traits=tuple(fields["any_traits"]),
            member_of=tuple(fields["member_of"]),
            forbidden_aggregates=frozenset(fields["forbidden_aggregates"]),
            in_tree=fields["in_tree"],
            root_required=frozenset(fields["root_required"]),
            root_forbidden=frozenset(fields["root_forbidden"]),
            move=move)
    except errors.InvalidRequest as exc:
        raise UseNova(f"request not expressible: {exc}") from exc


def _totals(allocs: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for res in allocs.values():
        for rc, n in res.items():
            out[rc] = out.get(rc, 0) + n
    return {rc: n for rc, n in out.items() if n > 0}


def _instance_cell(context, instance_uuid: str):
    try:
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            context, instance_uuid)
    except exception.InstanceMappingNotFound:
        return None
    return mapping.cell_mapping


def find_move(context, instance_uuid: str, spec_obj,
              client: PlacementClient) -> MoveContext | None:
    """The resize or cold migration being scheduled for the instance, from
    its ``pre-migrating`` Migration record (None if there is none or its
    migration consumer holds nothing, i.e. nothing was moved to it)."""
    cell = _instance_cell(context, instance_uuid)
    if cell is None:
        return None
    with nova_context.target_cell(context, cell) as cctxt:
        migrations = [m for m in objects.MigrationList.get_by_filters(
            cctxt, {"instance_uuid": instance_uuid, "status": "pre-migrating"})
            if m.migration_type in MOVE_TYPES]
        if not migrations:
            return None
        migration = max(migrations, key=lambda m: m.id)
        try:
            source = objects.ComputeNode.get_by_host_and_nodename(
                cctxt, migration.source_compute, migration.source_node)
        except exception.ComputeHostNotFound:
            LOG.warning("migration %s: source node %s on %s not found",
                        migration.uuid, migration.source_node,
                        migration.source_compute)
            return None
    old = _totals(client.get_consumer(migration.uuid).allocations)
    if not old:
        return None
    ignored = (spec_obj.ignore_hosts if "ignore_hosts" in spec_obj and
               spec_obj.ignore_hosts else ())
    return MoveContext(
        migration_uuid=migration.uuid, source_root=source.uuid,
        old_resources=old,
        allow_same_host=migration.source_compute not in ignored)


def allocation_request(sel: Selection) -> dict:
    """Placement's allocation request for a Selection, with the mapping of
    the one (unsuffixed) request group, as GET /allocation_candidates
    gives it since microversion 1.34."""
    body = sel.allocation_request
    body["mappings"] = {"": sorted(sel.allocations)}
    return body


# ------------------------------------------------------ nova host filters
class _Call:
    """State of one select_destinations call: the (filtered) spec, the
    instance index, and the HostStates read so far (they carry what the
    earlier instances of a multi-create consumed)."""

    def __init__(self, context, spec_obj, host_manager, limit: int):
        self.context = context
        self.spec_obj = spec_obj
        self.host_manager = host_manager
        self.limit = limit
        self.index = 0
        self.states: dict[str, Any] = {}

    def host_states(self, roots: Iterable[str]) -> list:
        missing = [r for r in dict.fromkeys(roots) if r not in self.states]
        if missing:
            for state in self.host_manager.get_host_states_by_uuids(
                    self.context, missing, self.spec_obj):
                self.states[state.uuid] = state
        return [self.states[r] for r in dict.fromkeys(roots) if r in self.states]

    def rank(self, cands: Sequence[Candidate]) -> dict[int, float]:
        """Weight (higher is better, nova's order) of each candidate nova's
        host filters keep, by ``id(candidate)``."""
        by_root: dict[str, list[Candidate]] = {}
        for c in cands:
            by_root.setdefault(c.root, []).append(c)
        hosts = self.host_states(by_root)
        requests: dict[int, Candidate] = {}
        for host in hosts:
            host.allocation_candidates = []
            for c in by_root[host.uuid]:
                ar = allocation_request(Selection(c.root, c.allocations))
                requests[id(ar)] = c
                host.allocation_candidates.append(ar)
        passed = [h for h in self.host_manager.get_filtered_hosts(
                  hosts, self.spec_obj, self.index) if h.allocation_candidates]
        if not passed:
            return {}
        weighed = self.host_manager.get_weighed_hosts(passed, self.spec_obj)
        if CONF.filter_scheduler.shuffle_best_same_weighed_hosts:
            best = [w for w in weighed if w.weight == weighed[0].weight]
            random.shuffle(best)
            weighed = best + list(weighed[len(best):])
        order = [w.obj for w in weighed]
        subset = order[:max(1, CONF.filter_scheduler.host_subset_size)]
        first = random.choice(subset)
        order.remove(first)
        order.insert(0, first)
        out: dict[int, float] = {}
        for pos, host in enumerate(order):
            for ar in host.allocation_candidates:
                cand = requests.get(id(ar))
                if cand is not None:
                    out[id(cand)] = float(len(order) - pos)
        return out


class NovaRankedSource:
    """A ``CandidateSource`` that passes our engine's candidates through
    nova's host filters and weighers.

    The engine answers with at most ``[scheduler] max_placement_results``
    candidates (or every one when nova asks placement without a limit);
    nova's filters drop hosts, nova's weighers order the rest; a
    candidate's weight becomes its rank in nova's order.
    """

    def __init__(self, inner):
        self.inner = inner
        self.virtual_release = getattr(inner, "virtual_release", True)
        self.call: _Call | None = None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _ranked(self, cands: Sequence[Candidate]) -> list[Candidate]:
        weights = self.call.rank(cands)
        kept = [dataclasses.replace(c, weight=weights[id(c)])
                for c in cands if id(c) in weights]
        return sorted(kept, key=lambda c: -c.weight)

    def candidates(self, request: ScheduleRequest, *, limit: int) -> list[Candidate]:
        if self.call is None:
            return self.inner.candidates(request, limit=limit)
        return self._ranked(self.inner.candidates(request, limit=self.call.limit))

    def move_candidates(self, request: ScheduleRequest, *, limit: int,
                        source: str, released) -> MoveCandidates:
        if self.call is None:
            return self.inner.move_candidates(
                request, limit=limit, source=source, released=released)
        view = self.inner.move_candidates(
            request, limit=self.call.limit, source=source, released=released)
        extra = [c for c in (view.same_host, view.held_source) if c is not None]
        weights = self.call.rank(list(view.others) + extra)

        def kept(c: Candidate | None) -> Candidate | None:
            if c is None or id(c) not in weights:
                return None
            return dataclasses.replace(c, weight=weights[id(c)])
        others = sorted((k for k in map(kept, view.others) if k is not None),
                        key=lambda c: -c.weight)
        return MoveCandidates(kept(view.same_host), others,
                              kept(view.held_source))

    def changed(self, providers) -> None:
        self.inner.changed(providers)


# --------------------------------------------------------------- selection
class NovaScheduler:
    """select_destinations for nova, on top of a scheduler-ext driver
    (``scheduler_ext.driver.SchedulerDriver`` or another plugin of the
    ``scheduler_ext.driver`` namespace with the same attributes)."""

    def __init__(self, driver, host_manager, client: PlacementClient):
        self.driver = driver
        self.host_manager = host_manager
        self.client = client
        self.lock = threading.Lock()
        self.notifier = rpc.get_notifier("scheduler")
        self.sources = driver.wrap_sources(NovaRankedSource)

    def select(self, context, spec_obj, instance_uuids, num_alts: int) -> list[list]:
        """Per instance: the claimed nova Selection, then up to ``num_alts``
        alternates in the same cell. Raises NoValidHost (nothing left
        claimed) or UseNova (nothing written)."""
        if not instance_uuids:
            raise UseNova("no instance uuids (a conductor older than Queens)")
        if sched_utils.request_is_rebuild(spec_obj):
            raise UseNova("a rebuild checks the current host only")
        spec = spec_obj.obj_clone()
        try:
            request_filter.process_reqspec(context, spec)
        except exception.RequestFilterFailed as exc:
            raise exception.NoValidHost(reason=exc.message)
        fields = parse_query(placement_query(context, spec, self.host_manager))
        try:
            with self.lock:
                return self._select(context, spec, list(instance_uuids),
                                    fields, num_alts)
        except errors.SchedulerExtError as exc:   # placement unreachable...
            LOG.error("scheduling %s failed: %s", instance_uuids, exc)
            raise exception.NoValidHost(reason=public_reason(exc))

    def _select(self, context, spec, instance_uuids: list[str],
                fields: dict, num_alts: int) -> list[list]:
        requests = []
        admin = context.elevated()
        for uuid in instance_uuids:
            move = (find_move(admin, uuid, spec, self.client)
                    if len(instance_uuids) == 1 else None)
            if move is None and self.client.get_consumer(uuid).allocations:
                raise UseNova(f"instance {uuid} already holds allocations and "
                              "no resize or cold migration is being "
                              "scheduled (an evacuation)")
            requests.append(schedule_request(fields, uuid, spec, context, move))
        limit = fields["limit"] or UNLIMITED
        call = _Call(admin, spec, self.host_manager, limit)
        self._notify(context, spec, "start")
        claimed: list[tuple[str, list[Selection], Any]] = []
        try:
            for index, request in enumerate(requests):
                uuid = request.instance_uuids[0]
                spec.instance_uuid = uuid
                spec.obj_reset_changes(["instance_uuid"])
                call.index = index
                sels = self._claim(call, request, num_alts)
                host = call.states[sels[0].root]
                claimed.append((uuid, sels, host))
                self._consume(host, spec, uuid)
        except Exception:
            for uuid, _, _ in claimed:
                if requests[0].move is None:
                    self._release(uuid)
            for _, _, host in claimed:
                host.updated = None     # re-read from the database next time
            raise
        self._notify(context, spec, "end")
        taken = {host.uuid for _, _, host in claimed}
        return [self._nova_selections(call, sels, host, num_alts, taken)
                for _, sels, host in claimed]

    def _claim(self, call: _Call, request: ScheduleRequest,
               num_alts: int) -> list[Selection]:
        uuid = request.instance_uuids[0]
        for source in self.sources:
            source.call = call
        try:
            return self.driver.select_destinations(request, num_alts)[0]
        except errors.NoValidHost as exc:
            LOG.info("no valid host for instance %s: %s", uuid, exc)
            raise exception.NoValidHost(
                reason="There are not enough hosts available.")
        except errors.Unsupported as exc:
            raise UseNova(f"the engine cannot answer: {exc}") from exc
        except errors.SchedulerExtError as exc:
            LOG.error("scheduling instance %s failed: %s", uuid, exc)
            raise exception.NoValidHost(reason=public_reason(exc))
        finally:
            for source in self.sources:
                source.call = None

    def _release(self, instance_uuid: str) -> None:
        try:
            self.client.delete_allocations(instance_uuid)
        except errors.NotFound:
            pass
        except errors.PlacementError as exc:
            LOG.error("could not release the claim of instance %s: %s",
                      instance_uuid, exc)

    @staticmethod
    def _consume(host, spec, instance_uuid: str) -> None:
        """What nova does after each claim of a multi-create: the host state
        consumes the flavor and server groups learn the host."""
        host.consume_from_request(spec)
        group = spec.instance_group
        if group is None:
            return
        group.hosts.append(host.host)
        group.obj_reset_changes(["hosts"])
        host.instances.setdefault(instance_uuid,
                                  objects.Instance(uuid=instance_uuid))

    @staticmethod
    def _nova_selections(call: _Call, sels: list[Selection], host,
                         num_alts: int, taken: set[str]) -> list:
        out = [objects.Selection.from_host_state(
            host, allocation_request=allocation_request(sels[0]),
            allocation_request_version=ALLOCATION_REQUEST_VERSION)]
        for sel in sels[1:]:
            if len(out) > num_alts:
                break
            alt = call.states.get(sel.root)
            if alt is None or sel.root in taken or \
                    alt.cell_uuid != host.cell_uuid:
                continue
            out.append(objects.Selection.from_host_state(
                alt, allocation_request=allocation_request(sel),
                allocation_request_version=ALLOCATION_REQUEST_VERSION))
        return out

    def _notify(self, context, spec, phase: str) -> None:
        self.notifier.info(context, f"scheduler.select_destinations.{phase}",
                           {"request_spec": spec.to_legacy_request_spec_dict()})
        compute_utils.notify_about_scheduler_action(
            context=context, request_spec=spec,
            action=obj_fields.NotificationAction.SELECT_DESTINATIONS,
            phase=getattr(obj_fields.NotificationPhase, phase.upper()))


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


# --------------------------------------------------------------- reconcile
def _node_uuid(cctxt, host: str | None, node: str | None) -> str | None:
    if not host or not node:
        return None
    try:
        return objects.ComputeNode.get_by_host_and_nodename(cctxt, host, node).uuid
    except exception.ComputeHostNotFound:
        return None


def _moved_elsewhere(m) -> bool:
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
            _moved_elsewhere(migrations[-1]):
        return None
    host = _node_uuid(cctxt, inst.host, inst.node)
    if host is None:
        return None
    moves = []
    for i, m in enumerate(migrations):
        last = i == len(migrations) - 1
        if inst.vm_state == "resized":
            if not last:
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
        else:
            if m.status not in FINISHED:
                LOG.debug("migration %s of instance %s left %r; the instance "
                          "has no task running: the move is over", m.uuid,
                          instance_uuid, m.status)
            moves.append(MoveState(m.uuid, "", "", {}, {}, False))
    if inst.vm_state == "resized" and not any(m.in_progress for m in moves):
        return None
    return InstanceState(
        uuid=inst.uuid, host=host,
        resources=sched_utils.resources_from_flavor(inst, inst.flavor),
        project_id=inst.project_id, user_id=inst.user_id,
        moves=tuple(moves))


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


def _classes(allocs: Mapping[str, Mapping[str, int]]) -> set[str]:
    return {rc for res in allocs.values() for rc in res}


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
            foreign |= _classes(client.get_consumer(consumer).allocations) - allowed
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
