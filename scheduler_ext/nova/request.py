"""nova's request objects to ours, and our answers to nova's.

A RequestSpec becomes nova's own placement query string
(``utils.resources_from_request_spec``: flavor, extra specs, image traits,
destination aggregates, ``in_tree`` of a targeted host, ``root_required``
such as ``OWNER_NOVA``), parsed by the one query parser
(``CandidateRequest.from_query``, by the rules of microversion 1.36, the
one nova sends it with), granular groups, ``group_policy`` and
``same_subtree`` included. A resize or cold migration is recognised by
its ``pre-migrating`` Migration record (``migrations``), looked for only
in a request with a ``requested_destination`` (``may_be_move``). A query
placement would refuse raises ``UseNova``.
"""

from __future__ import annotations

from typing import Callable
from urllib import parse

from oslo_log import log as logging

import nova.conf
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler import utils as sched_utils

from scheduler_ext import errors
from scheduler_ext.moves.request import MoveContext, ScheduleRequest
from scheduler_ext.nova import migrations
from scheduler_ext.placement import Allocations, allocations
from scheduler_ext.placement.model import ConsumerAllocations
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.sources.base import Candidate

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

#: Microversion written into the Selections' ``allocation_request_version``:
#: nova's conductor claims an alternate with it (PUT /allocations). 1.36 is
#: what nova's own scheduler uses; it accepts the ``mappings`` key and does
#: not require ``consumer_type``.
ALLOCATION_REQUEST_VERSION = "1.36"
#: Microversion nova 34 asks GET /allocation_candidates with
#: (``report.SAME_SUBTREE_VERSION``).
NOVA_QUERY_VERSION = "1.36"
#: Migration types whose allocations the conductor moves to the migration
#: consumer before it asks the scheduler (``MigrationTask``).
MOVE_TYPES = ("resize", "migration")


class UseNova(Exception):
    """Leave this request to nova's own scheduling code (the reason is the
    message); nothing has been written."""


def parse_query(query: str) -> CandidateRequest:
    """Our query for nova's ``GET /allocation_candidates`` query string,
    read by the rules of the microversion nova sends it with (1.36):
    granular groups (ports with a QoS policy, vGPUs, PCI devices,
    accelerators), ``group_policy`` and ``same_subtree`` included.

    Raises UseNova for what placement itself would refuse (nova's own code
    then reports it as nova does).
    """
    try:
        parsed = CandidateRequest.from_query(
            parse.parse_qsl(query, keep_blank_values=True),
            microversion=NOVA_QUERY_VERSION)
    except errors.Unsupported as exc:
        raise UseNova(str(exc)) from exc
    except errors.InvalidRequest as exc:
        raise UseNova(f"request not expressible: {exc}") from exc
    return parsed


def placement_query(context, spec_obj, host_manager) -> str:
    """nova's own placement query for ``spec_obj`` (request filters must
    have run). Raises NoValidHost when a targeted host does not exist."""
    rr = sched_utils.resources_from_request_spec(
        context, spec_obj, host_manager, enable_pinning_translate=True)
    if (rr.cpu_pinning_requested and
            not CONF.workarounds.disable_fallback_pcpu_query):
        raise UseNova("pinned CPUs with nova's VCPU fallback query")
    return rr.to_querystring()


def schedule_request(query: CandidateRequest, instance_uuid: str, spec_obj,
                     context, move: MoveContext | None) -> ScheduleRequest:
    """Our request for one instance (UseNova if it does not validate)."""
    user_id = (spec_obj.user_id if "user_id" in spec_obj and spec_obj.user_id
               else context.user_id)
    try:
        return ScheduleRequest((instance_uuid,), query, spec_obj.project_id,
                               user_id, move=move)
    except errors.InvalidRequest as exc:
        raise UseNova(f"request not expressible: {exc}") from exc


def instance_cell(context, instance_uuid: str):
    """The instance's CellMapping, or None when it has no mapping."""
    try:
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            context, instance_uuid)
    except exception.InstanceMappingNotFound:
        return None
    return mapping.cell_mapping


def may_be_move(spec_obj) -> bool:
    """Whether ``spec_obj``, as the conductor sent it (before the request
    filters, which may add a destination of their own), can be a resize or
    cold migration. nova's conductor gives every one a
    ``requested_destination`` (``MigrationTask`` sets its cell, nova >= 21);
    a boot has one only when a host or node was asked for. Without one no
    Migration record is looked for: a boot costs no database read here."""
    return bool("requested_destination" in spec_obj and
                spec_obj.requested_destination)


def find_move(context, instance_uuid: str, spec_obj,
              read_consumer: Callable[[str], ConsumerAllocations],
              root_of: Callable[[Allocations], str | None]
              ) -> MoveContext | None:
    """The resize or cold migration being scheduled for the instance, from
    its newest ``pre-migrating`` Migration record of ``MOVE_TYPES``
    (``migrations.pending_migration``; None if there is none or its
    migration consumer holds nothing, i.e. nothing was moved to it). The
    record is looked for in the cell the conductor asked for (it asks for
    the instance's own), else in the instance's mapped cell. The migration
    consumer is read with ``read_consumer`` (the driver's).

    The source host is the root that consumer's allocations sit on, as
    ``root_of`` (the driver's ``holder_root``) tells it: nova's conductor
    moved everything the instance held, all on its compute node's tree
    and shared pools, to the migration. When it cannot tell, the source
    ComputeNode record is read."""
    dest = spec_obj.requested_destination if may_be_move(spec_obj) else None
    cell = dest.cell if dest is not None and "cell" in dest and dest.cell \
        else instance_cell(context, instance_uuid)
    if cell is None:
        return None
    with nova_context.target_cell(context, cell) as cctxt:
        migration = migrations.pending_migration(cctxt, instance_uuid, MOVE_TYPES)
    if migration is None:
        return None
    held = read_consumer(migration.uuid)
    old = allocations.class_totals(held.allocations)
    if not old:
        return None
    source_root = root_of(held.allocations)
    if source_root is None:
        with nova_context.target_cell(context, cell) as cctxt:
            try:
                source_root = objects.ComputeNode.get_by_host_and_nodename(
                    cctxt, migration.source_compute, migration.source_node).uuid
            except exception.ComputeHostNotFound:
                LOG.warning("migration %s: source node %s on %s not found",
                            migration.uuid, migration.source_node,
                            migration.source_compute)
                return None
    ignored = (spec_obj.ignore_hosts if "ignore_hosts" in spec_obj and
               spec_obj.ignore_hosts else ())
    return MoveContext(
        migration_uuid=migration.uuid, source_root=source_root,
        old_resources=old,
        allow_same_host=migration.source_compute not in ignored,
        migration_held=held)


def allocation_request(cand: Candidate) -> dict:
    """Placement's allocation request for ``cand`` with its request
    groups' ``mappings``, as GET /allocation_candidates gives it since
    microversion 1.34 (nova fills the providers of ports, accelerators and
    granular flavor groups from them). Built directly: nova's ranking asks
    for one per candidate of every decision."""
    allocs, mappings = cand.allocations, cand.mappings
    return {"allocations": {rp: {"resources": dict(res)} for rp, res in allocs.items()},
            "mappings": {k: list(v) for k, v in mappings.items()}
            if mappings is not None else {"": sorted(allocs)}}
