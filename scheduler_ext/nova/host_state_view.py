"""nova's host states of the compute nodes, mirrored from the cell
databases and refreshed by what changed.

For each scheduling request nova's ``HostManager.get_host_states_by_uuids``
reads the candidates' compute nodes and every ``nova-compute`` service row
of each cell, and builds a new ``HostState`` per candidate (its metrics
are parsed from JSON, and each update takes a lock). At 1,000 candidates
that is 0.3 to 0.6 s a request, whatever changed since the last one.

``HostStateView`` holds, per cell, the compute node rows and the
``nova-compute`` service rows as nova's objects, and per compute node a
host state built from them by nova's own code (``HostState`` and its
``update``). Each request first refreshes the cells it reads: one
statement per table returns the rows created, updated or deleted since
``OVERLAP_SECONDS`` before the previous refresh started; only the rows
that differ from the ones held are taken. A changed compute node's host state
is rebuilt; a changed service row replaces the service of its host's
states (what nova's ``update`` does with a service). Each candidate's host
state is then a copy of its built one, given the aggregates and instances
nova gives it per request (``_get_aggregates_info``,
``_get_instance_info``) and its own limits and PCI device pools, so that a
request's filters and claims never touch another request's host states.

Same host states as nova's: same rows, same code building them. The
timestamps are written by nova's conductors: a row committed later than
``OVERLAP_SECONDS`` after its own timestamp (by the scheduler's clock:
commit delay and clock skew together) is missed until it is written
again. Services are written again at every heartbeat (``report_interval``,
10 s by default), so a refresh reads about ``OVERLAP_SECONDS /
report_interval`` of the fleet's service rows; compute nodes are read as
their resource trackers write them. The statements scan the tables (nova
indexes none of the timestamps): the database reads every row, Python
only the changed ones.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import datetime
import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from oslo_log import log as logging
from oslo_utils import timeutils

from nova import context as nova_context
from nova import objects
from nova.db.main import api as main_db
from nova.db.main import models
from nova.objects import base as obj_base
from nova.scheduler import host_manager

from scheduler_ext.nova.host_columns import HostColumns
from scheduler_ext.nova.workers import Workers

LOG = logging.getLogger(__name__)

#: How far behind the newest timestamp seen a refresh looks again, in
#: seconds: the commit delay and conductor clock skew the view tolerates.
OVERLAP_SECONDS = 2.0

_COMPUTE_NODES = models.ComputeNode.__table__
_SERVICES = models.Service.__table__


def _changed_rows(context, table: sa.Table, since: datetime.datetime | None,
                  where: Any = None) -> list[dict]:
    """Rows of ``table`` (deleted ones included) created, updated or deleted
    after ``since`` less the overlap (UTC, as nova stamps them); every row
    not deleted when ``since`` is None."""
    select = sa.select(table)
    if where is not None:
        select = select.where(where)
    if since is None:
        select = select.where(table.c.deleted == 0)
    else:
        low = since - datetime.timedelta(seconds=OVERLAP_SECONDS)
        select = select.where(sa.or_(table.c.created_at > low, table.c.updated_at > low,
                                     table.c.deleted_at > low))
    engine = main_db.get_engine(context=context)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select).mappings()]


@dataclasses.dataclass
class CellMirror:
    """One cell's compute node and ``nova-compute`` service rows as the
    database last gave them, and the host states built from them."""

    cell_uuid: str
    #: compute node id -> its row; uuid -> the ComputeNode object
    node_rows: dict[int, dict] = dataclasses.field(default_factory=dict)
    nodes: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: service id -> its row; host -> the Service object
    service_rows: dict[int, dict] = dataclasses.field(default_factory=dict)
    services: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: compute node uuid -> its host state, built by nova's code
    built: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: compute node uuids per host (a host may have several nodes: ironic)
    uuids_of_host: dict[str, set[str]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(set))
    #: when the last refresh started, by this host's clock in UTC (None:
    #: never; the next reads the tables whole)
    read_at: datetime.datetime | None = None
    #: compute node uuids whose host state changed (built, rebuilt, given a
    #: new service, or gone) since the view's columns last took them
    changed: set[str] = dataclasses.field(default_factory=set)
    #: version -> how many of the service rows held have it and are not
    #: forced down (``minimum_version``)
    versions: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def refresh(self, context, interval: float = 0.0,
                since: datetime.datetime | None = None) -> None:
        """Take the rows changed since the last refresh (all at the first),
        unless it started less than ``interval`` seconds ago, or at or
        after ``since`` (UTC). A row stamped more than ``OVERLAP_SECONDS``
        before the last refresh started was committed before it (the
        tolerance) and taken then."""
        started = self.due(interval, since)
        if started is not None:
            self.take_services(context)
            self.take_nodes(context, started)

    def due(self, interval: float = 0.0,
            since: datetime.datetime | None = None) -> datetime.datetime | None:
        """When a refresh is due (see ``refresh``), the time it starts (UTC);
        else None."""
        started = timeutils.utcnow()
        if self.read_at is not None and started < self.read_at:
            # the clock went back (a step, a test's override): rows stamped
            # by it would look older than the last refresh
            LOG.warning("the clock went back by %s; reading cell %s whole",
                        self.read_at - started, self.cell_uuid)
            self.forget()
        if self.read_at is not None and interval > 0 and \
                (started - self.read_at).total_seconds() < interval:
            return None
        if self.read_at is not None and since is not None and self.read_at >= since:
            return None
        return started

    def take_services(self, context) -> None:
        """A due refresh's first half: the service rows changed."""
        rows = _changed_rows(context, _SERVICES, self.read_at,
                             _SERVICES.c.binary == "nova-compute")
        changed = [r for r in rows if self.service_rows.get(r["id"]) != r]
        if changed:
            self._take_services(context, changed)

    def read_nodes(self, context) -> list[dict]:
        """The compute node rows a due refresh's second half takes (read
        after ``due`` gave its start; see ``take_nodes``)."""
        return _changed_rows(context, _COMPUTE_NODES, self.read_at)

    def take_nodes(self, context, started: datetime.datetime,
                   read: Callable[[], list[dict]] | None = None) -> None:
        """A due refresh's second half (``started``: what ``due`` gave): the
        compute node rows changed (``read_nodes``, or ``read()``: those
        rows read elsewhere)."""
        rows = self.read_nodes(context) if read is None else read()
        self.read_at = started
        changed = [r for r in rows if self.node_rows.get(r["id"]) != r]
        if changed:
            self._take_nodes(context, changed)

    def forget(self) -> None:
        """Drop every row and host state held: the next refresh reads the
        cell whole."""
        self.changed.update(self.nodes)
        for held in (self.node_rows, self.nodes, self.service_rows, self.services,
                     self.built, self.uuids_of_host, self.versions):
            held.clear()
        self.read_at = None

    def minimum_version(self) -> int | None:
        """The smallest version of the cell's ``nova-compute`` services not
        forced down, as nova's ``service_get_minimum_version`` gives it for
        one cell (None: no such service)."""
        return min(self.versions, default=None)

    def _count_version(self, row: dict, by: int) -> None:
        if row["forced_down"] is None or row["forced_down"] or row["version"] is None:
            return      # SQL's min() and ``forced_down == false`` skip it
        self.versions[row["version"]] += by
        if not self.versions[row["version"]]:
            del self.versions[row["version"]]

    def _take_services(self, context, rows: list[dict]) -> None:
        live = [r for r in rows if not r["deleted"]]
        made = obj_base.obj_make_list(context, objects.ServiceList(context),
                                      objects.Service, live)
        for row in rows:
            previous = self.service_rows.pop(row["id"], None)
            if previous is not None:
                self._count_version(previous, -1)
            if not row["deleted"]:
                self.service_rows[row["id"]] = row
                self._count_version(row, +1)
            else:
                held = self.services.get(row["host"])
                if held is not None and held.id == row["id"]:
                    del self.services[row["host"]]
                    for uuid in self.uuids_of_host.get(row["host"], ()):
                        self.built.pop(uuid, None)
                        self.changed.add(uuid)
        for service in made:
            self.services[service.host] = service
            for uuid in self.uuids_of_host.get(service.host, ()):
                self.changed.add(uuid)
                state = self.built.get(uuid)
                if state is not None:
                    state.service = host_manager.ReadOnlyDict(dict(service))

    def _take_nodes(self, context, rows: list[dict]) -> None:
        live = [r for r in rows if not r["deleted"]]
        made = obj_base.obj_make_list(context, objects.ComputeNodeList(context),
                                      objects.ComputeNode, live)
        for row in rows:
            if not row["deleted"]:
                self.node_rows[row["id"]] = row
            else:
                self.node_rows.pop(row["id"], None)
                held = self.nodes.get(row["uuid"])
                if held is not None and held.id == row["id"]:
                    del self.nodes[row["uuid"]]
                    self.built.pop(row["uuid"], None)
                    self.changed.add(row["uuid"])
                    self.uuids_of_host[row["host"]].discard(row["uuid"])
        for node in made:
            previous = self.nodes.get(node.uuid)
            if previous is not None and previous.host != node.host:
                self.uuids_of_host[previous.host].discard(node.uuid)
            self.nodes[node.uuid] = node
            self.uuids_of_host[node.host].add(node.uuid)
            self.built.pop(node.uuid, None)     # rebuilt when next asked for
            self.changed.add(node.uuid)

    def host_state(self, manager: host_manager.HostManager, uuid: str) -> Any | None:
        """The built host state of compute node ``uuid`` (built now if it
        was not), or None: no such node, or its host has no service row
        (nova logs and skips such a node)."""
        state = self.built.get(uuid)
        if state is not None:
            return state
        node = self.nodes.get(uuid)
        if node is None:
            return None
        service = self.services.get(node.host)
        if service is None:
            LOG.warning("No compute service record found for host %s", node.host)
            return None
        state = manager.host_state_cls(node.host, node.hypervisor_hostname,
                                       self.cell_uuid, compute=node)
        state.update(node, dict(service))
        self.built[uuid] = state
        return state


class HostStateView:
    """nova's host states of every cell's compute nodes (see the module's
    text), for one HostManager."""

    def __init__(self, manager: host_manager.HostManager, refresh_interval: float = 0.0):
        self.manager = manager
        #: seconds during which a cell's mirror is used without a refresh
        self.refresh_interval = refresh_interval
        self.cells: dict[str, CellMirror] = {}
        #: every cell's host states as columns (``host_columns``), brought
        #: up to date by ``refreshed_columns``
        self.columns = HostColumns()
        #: requests run concurrently (green or native threads): one at a
        #: time refreshes the mirrors and takes its built states
        self._lock = threading.Lock()
        #: an early read's compute node rows, read beside its service rows
        #: (a thread of its own: its reads wait for nothing but the
        #: databases)
        self._node_reads = Workers("scheduler-ext-node-reads")

    def built_states(self, context, cells: Sequence, compute_uuids: Iterable[str],
                     since: datetime.datetime | None = None) -> dict[tuple[str, str], Any]:
        """(host, node) -> built host state of the compute nodes
        ``compute_uuids`` in ``cells``, cell by cell in the columns' row
        order, after refreshing their mirrors
        (unless refreshed at or after ``since``, UTC). A cell that fails to
        answer gives none of its hosts, as in nova. The built states are
        the view's: hand out ``fresh_copy``s."""
        with self._lock:
            return self._built_states(context, cells, set(compute_uuids), since)

    def read_cells(self, context, cells: Sequence) -> int:
        """Read ``cells`` whole and build every host state with nova's code,
        as the service starts, so that no request pays for either (nova's
        code builds one in about 0.3 ms: 3 s at 10,000 compute nodes);
        returns how many were built. A cell that fails to answer is read by
        the first request that asks for it."""
        with self._lock:
            built = 0
            for cell in cells:
                mirror = self._refreshed(context, cell, 0.0)
                if mirror is None:
                    continue
                for uuid in list(mirror.nodes):
                    built += mirror.host_state(self.manager, uuid) is not None
                self._write_columns(mirror)
            return built

    def refresh_cells(self, context, cells: Sequence,
                      services_taken: Callable[[int | None], None] | None = None) -> bool:
        """Refresh ``cells``' mirrors (a request's early read: see
        ``refreshed_columns``' ``since``); False when one failed to answer.
        ``services_taken`` is given nova's minimum ``nova-compute`` version
        over ``cells`` (``_minimum_compute_version``; None when one failed)
        once their service rows are taken, before their compute nodes are
        taken. The compute node rows are read beside the service rows, on
        the view's own thread."""
        with self._lock:
            answered, due = True, []
            for cell in cells:
                mirror = self._mirror(cell)
                started = mirror.due(self.refresh_interval)
                if started is not None:
                    due.append((cell, mirror, started, self._node_reads.submit(
                        self._read_in_cell, context, cell, mirror.read_nodes)))
            taken = []
            for cell, mirror, started, nodes in due:
                if self._in_cell(context, cell, mirror.take_services):
                    taken.append((cell, mirror, started, nodes))
                else:
                    answered = False
            if services_taken is not None:
                services_taken(self._minimum_compute_version(cells) if answered else None)
            for cell, mirror, started, nodes in taken:
                answered &= self._in_cell(context, cell, functools.partial(
                    mirror.take_nodes, started=started, read=nodes.result))
            return answered

    @staticmethod
    def _read_in_cell(context, cell, read: Callable[[Any], list[dict]]) -> list[dict]:
        with nova_context.target_cell(context, cell) as cctxt:
            return read(cctxt)

    def _minimum_compute_version(self, cells: Sequence) -> int:
        """What nova's ``get_minimum_version_all_cells(context,
        ['nova-compute'])`` answers over ``cells`` (each answering), from
        their mirrors as last refreshed: the smallest per-cell minimum that
        is not 0 or missing, or 0."""
        minima = [self.cells[cell.uuid].minimum_version() if cell.uuid in self.cells
                  else None for cell in cells]
        return min(filter(None, minima), default=0)

    def refreshed_columns(self, context, cells: Sequence,
                          since: datetime.datetime | None = None
                          ) -> tuple[HostColumns, list[int]]:
        """The columns of every cell's host states, ``cells``' mirrors
        refreshed first (unless refreshed at or after ``since``, UTC: the
        request's arrival), and the cell numbers (``HostColumns.cell``) of
        those that answered. The columns are the view's, changed by the
        next call: read them within one request (requests are ranked one
        at a time)."""
        with self._lock:
            answered = []
            for cell in cells:
                mirror = self._refreshed(context, cell, self.refresh_interval, since)
                if mirror is None:
                    continue
                self._write_columns(mirror)
                answered.append(self.columns.number_of_cell(cell.uuid))
            return self.columns, answered

    def _write_columns(self, mirror: CellMirror) -> None:
        """The columns take the host states of ``mirror`` that changed."""
        changed, mirror.changed = mirror.changed, set()
        for uuid in changed:
            state = mirror.host_state(self.manager, uuid)
            if state is None:
                self.columns.drop(uuid)
            else:
                self.columns.write(uuid, state)

    def _refreshed(self, context, cell, interval: float,
                   since: datetime.datetime | None = None) -> CellMirror | None:
        """The mirror of ``cell`` after its refresh (see ``CellMirror.refresh``),
        or None when the cell failed to answer (as nova's scatter-gather,
        which skips such a cell)."""
        mirror = self._mirror(cell)
        if not self._in_cell(context, cell, functools.partial(
                mirror.refresh, interval=interval, since=since)):
            return None
        return mirror

    def _mirror(self, cell) -> CellMirror:
        mirror = self.cells.get(cell.uuid)
        if mirror is None:
            mirror = self.cells[cell.uuid] = CellMirror(cell.uuid)
        return mirror

    @staticmethod
    def _in_cell(context, cell, read: Callable[[Any], None]) -> bool:
        """``read(cell's context)``; False, logged, when the cell failed to
        answer."""
        try:
            with nova_context.target_cell(context, cell) as cctxt:
                read(cctxt)
        except Exception as exc:
            LOG.warning("reading the compute nodes of cell %s failed: %s",
                        cell.uuid, exc, exc_info=True)
            return False
        return True

    def _built_states(self, context, cells: Sequence, wanted: set[str],
                      since: datetime.datetime | None) -> dict[tuple[str, str], Any]:
        states: dict[tuple[str, str], Any] = {}
        for cell in cells:
            mirror = self._refreshed(context, cell, self.refresh_interval, since)
            if mirror is None:
                continue
            # in the columns' row order (nova's order fills its set in it)
            self._write_columns(mirror)
            row = self.columns.row_by_uuid
            for uuid in sorted(wanted.intersection(mirror.nodes),
                               key=lambda u: row.get(u, -1)):
                built = mirror.host_state(self.manager, uuid)
                if built is not None:
                    states[(built.host, built.nodename)] = built
        return states


def fresh_copy(built: Any) -> Any:
    """A copy of a view's built host state for one request: its own limits,
    allocation candidates and PCI device pools (a claim takes devices);
    the rest is shared and replaced, never changed in place, by nova's
    filters and ``consume_from_request``."""
    # copy.copy of a HostState goes through __reduce_ex__: 3x slower
    state = object.__new__(type(built))
    state.__dict__.update(built.__dict__)
    state.limits = {}
    state.allocation_candidates = []
    if state.pci_stats and state.pci_stats.pools:
        state.pci_stats = copy.deepcopy(state.pci_stats)
    return state


class MirroredHostManager(host_manager.HostManager):
    """nova's HostManager whose per-request host states come from a
    ``HostStateView``. Reads of every compute node (``compute_uuids``
    None: nova's periodic host discovery and the like) are nova's own."""

    view: HostStateView

    #: bumped at each change of nova's aggregate maps (``aggs_by_id``,
    #: ``host_aggregates_map``)
    aggregates_version = 0
    #: (aggregates_version, host names known, groups) of the last request
    #: ranked on columns (``column_ranking.AggregateGroups``)
    aggregate_groups: tuple[int, int, Any] | None = None

    def get_host_states_by_uuids(self, context, compute_uuids, spec_obj,
                                 since: datetime.datetime | None = None):
        """nova's, from the view; ``since`` (UTC, ours): a cell refreshed at
        or after it (a request's early read) is not refreshed again."""
        if compute_uuids is None:
            return super().get_host_states_by_uuids(context, compute_uuids, spec_obj)
        built = self.view.built_states(context, self.cells_for(spec_obj), compute_uuids,
                                       since)
        # in nova's order: a set filled with the (host, node) keys one at a
        # time, as nova's host manager fills it (``set(dict)`` would size
        # the set up front: another table, another order)
        return [self.request_state(context, built[key]) for key in set(iter(built))]

    def cells_for(self, spec_obj) -> list:
        """The cells nova reads for ``spec_obj``: the requested cell of a
        move within one cell, else every enabled cell."""
        destination = (spec_obj.requested_destination
                       if spec_obj and 'requested_destination' in spec_obj else None)
        if (destination and 'cell' in destination and destination.cell and
                not destination.allow_cross_cell_move):
            return [destination.cell]
        return self.enabled_cells

    def request_state(self, context, built) -> Any:
        """A request's copy of a view's built host state, given what nova
        gives it per request (its aggregates and instances)."""
        state = fresh_copy(built)
        state.aggregates = self._get_aggregates_info(state.host)
        state.instances = self._get_instance_info(context, state)
        return state

    def update_aggregates(self, aggregates):
        super().update_aggregates(aggregates)
        self.aggregates_version += 1

    def delete_aggregate(self, aggregate):
        super().delete_aggregate(aggregate)
        self.aggregates_version += 1


def mirror_host_states(manager: host_manager.HostManager,
                       refresh_interval: float = 0.0) -> None:
    """Give the HostManager nova's scheduler manager built the behaviour of
    ``MirroredHostManager``. nova builds it in the manager's constructor
    (reading cells, aggregates and every host's instances); building a
    second one would double the service's start-up, so the instance takes
    the subclass and its view."""
    if type(manager) is host_manager.HostManager:
        manager.__class__ = MirroredHostManager
        manager.view = HostStateView(manager, refresh_interval)
