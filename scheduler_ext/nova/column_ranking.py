"""nova's enabled host filters and weighers over the mirrored host
states' columns (``host_columns``), for every host that fits.

With objects (``vector_filtering``, ``vector_weighing``) each request
copies and reads one host state per candidate: about 15 µs a host, so
nova's Python code sees at most ``max_placement_results`` hosts. On the
columns a request reads arrays, and nova's filters and weighers see every
host the engine found fitting.

A request is ranked here when every enabled filter and weigher has a
column kernel that accepts it (``ColumnPlan.of``); else (a NUMA or PCI
filter, an operator's class, server-group instances to count, forced
hosts, a targeted host) on objects, as before. The per-request values nova
gives a host state are taken the same way: its aggregates from the host
manager's aggregate maps (one group of hosts per set of aggregates), and,
after a claim of a multi-create, the claimed host's own consumed state.

The filters' verdicts, the weights and the final order are those of
nova's code on those host states: ``tests/unit/nova/
test_column_ranking.py`` checks them against nova's own filter handler and
weighers. nova's host order (the iteration order of a set of (host, node)
keys, ``NovaOrder``) decides only between equal weights: it is made only
when hosts tie where the order is read (``head_first``, ``place``).
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import nova.conf
import numpy as np
from nova.scheduler.filters import (affinity_filter, aggregate_image_properties_isolation,
                                    aggregate_instance_extra_specs,
                                    aggregate_multitenancy_isolation, all_hosts_filter,
                                    compute_capabilities_filter, compute_filter,
                                    image_props_filter, io_ops_filter,
                                    num_instances_filter)
from nova.scheduler import utils as scheduler_utils
from nova.scheduler.weights import (affinity, compute, cpu, cross_cell, disk,
                                    hypervisor_version, image_props, io_ops,
                                    metrics, num_instances, pci, ram)
from oslo_log import log as logging
from oslo_utils import timeutils

from scheduler_ext.engine import weigh
from scheduler_ext.nova import vector_filtering, vector_weighing
from scheduler_ext.nova.host_columns import HostColumns, microseconds, number_of
from scheduler_ext.sources.base import Candidate, LazyCandidates, roots_of

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

#: host-state attributes nova gives per request (not the built state's)
PER_REQUEST = frozenset({"aggregates", "instances", "limits", "allocation_candidates"})


class NovaOrder:
    """nova's order of the hosts a request read: the iteration order of a
    set filled with their (host, node) keys one at a time, as nova's host
    manager fills it from the compute nodes its cell databases return (in
    an order SQL leaves open). Here the keys are added in the columns' row
    order: the order the view first read the nodes from those databases.
    The set is made when a place is first asked for; a host's place is
    found by its key's ``id()``, for the columns' own key tuples fill the
    set."""

    def __init__(self, columns: HostColumns, read: np.ndarray):
        self.columns = columns
        #: the rows read, in the order their keys are added
        self.read = read
        #: the keys' ids in nova's order, and the positions that sort them
        self._ids: np.ndarray | None = None
        self._sorted: np.ndarray | None = None

    def places(self, rows: np.ndarray) -> np.ndarray:
        """Per row of ``rows`` (rows read), its place in nova's order."""
        keys = self.columns.keys
        if self._ids is None:
            seen = set(map(keys.__getitem__, self.read.tolist()))
            self._ids = np.fromiter(map(id, seen), dtype=np.int64, count=len(seen))
            self._sorted = np.argsort(self._ids)
        assert self._sorted is not None
        wanted = np.fromiter(map(id, map(keys.__getitem__, rows.tolist())),
                             dtype=np.int64, count=len(rows))
        return self._sorted[np.searchsorted(self._ids, wanted, sorter=self._sorted)]


class RequestHosts:
    """One request's hosts on the columns: ``rows`` (each once, in no
    particular order: ``in_nova_order`` gives nova's), their aggregate
    groups, and the states this call handed out (``consumed``: row -> host
    state; a multi-create's claims consumed some)."""

    def __init__(self, columns: HostColumns, rows: np.ndarray,
                 aggregate_groups: "AggregateGroups", consumed: dict[int, Any],
                 nova_order: NovaOrder):
        self.columns = columns
        self.rows = rows
        self.groups = aggregate_groups
        self.consumed = consumed
        self.nova_order = nova_order
        self._group_of: np.ndarray | None = None
        #: positions in ``rows`` of the consumed hosts, and their states
        self._patches: list[tuple[int, Any]] = []
        if consumed:
            at = np.flatnonzero(np.isin(rows, list(consumed)))
            self._patches = [(int(i), consumed[int(rows[i])]) for i in at]

    def __len__(self) -> int:
        return len(self.rows)

    def numbers(self, name: str) -> np.ndarray:
        """The float64 column ``name`` over the request's hosts."""
        out = self.columns.column(name)[self.rows]
        for i, state in self._patches:
            value = number_of(state, name)
            if value is None:
                raise NotOnColumns(f"{name} of {state.host} is not a number")
            out[i] = value
        return out

    def pci_free(self) -> np.ndarray:
        out = self.columns.column("pci_free")[self.rows]
        for i, state in self._patches:
            pools = state.pci_stats.pools if state.pci_stats else ()
            out[i] = sum(pool["count"] for pool in pools)
        return out

    def flags(self, name: str) -> np.ndarray:
        return self.columns.column(name)[self.rows]

    def states(self) -> "HostStates":
        """The host states, consumed ones included (for kernels that read
        what the columns do not hold: capabilities, image properties)."""
        return HostStates(self)

    def group_of(self) -> np.ndarray:
        """Per host, its aggregate group (``AggregateGroups.groups``)."""
        if self._group_of is None:
            self._group_of = self.groups.of_host[self.columns.column("host_number")[self.rows]]
        return self._group_of

    def take(self, keep: np.ndarray) -> "RequestHosts":
        """The hosts where ``keep`` is True, in order."""
        return RequestHosts(self.columns, self.rows[keep], self.groups, self.consumed,
                            self.nova_order)

    def in_nova_order(self) -> np.ndarray:
        """Positions in ``rows``, in nova's order."""
        return np.argsort(self.nova_order.places(self.rows), kind="stable")


class HostStates(Sequence):
    """A request's host states, each read when asked for (a kernel that
    finds nothing to check reads none)."""

    def __init__(self, hosts: RequestHosts):
        self._states = hosts.columns.states
        self._rows = hosts.rows.tolist()
        self._patched = dict(hosts._patches)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(len(self))[i]]
        state = self._patched.get(i if i >= 0 else i + len(self))
        return self._states[self._rows[i]] if state is None else state


class AggregateGroups:
    """The hosts grouped by the set of aggregates nova's host manager maps
    them to: ``of_host[host number]`` is a group, ``groups[g]`` its
    aggregates as nova lists them for a host state (group 0: none)."""

    def __init__(self, manager, columns: HostColumns):
        self.groups: list[list] = [[]]
        self.of_host = np.zeros(len(columns.lowered_hosts), dtype=np.int64)
        number: dict[frozenset, int] = {frozenset(): 0}
        for host, ids in list(manager.host_aggregates_map.items()):
            at = columns.host_numbers.get(host)
            if at is None or not ids:
                continue
            key = frozenset(ids)
            group = number.get(key)
            if group is None:
                group = number[key] = len(self.groups)
                self.groups.append(manager._get_aggregates_info(host))
            self.of_host[at] = group
        #: one stand-in host state per group: the aggregate filters read
        #: nothing else of a host
        self.stand_ins = [SimpleNamespace(aggregates=aggs) for aggs in self.groups]

    def multipliers(self, hosts: RequestHosts, key: str, default: float) -> np.ndarray:
        """Per host, its weigher multiplier for aggregate metadata ``key``."""
        per_group = np.array([vector_weighing.aggregate_multiplier(aggs, key, default)
                              for aggs in self.groups], dtype=float)
        if (per_group == per_group[0]).all():   # one value: no host's aggregates set it
            return np.full(len(hosts), per_group[0])
        return per_group[hosts.group_of()]


# ------------------------------------------------------------------ filters
@dataclasses.dataclass(frozen=True)
class ColumnFilter:
    """One of nova's filters on columns: whether it ``accepts`` a request
    (reads nothing per host), and per host whether it passes (``mask``)."""

    accepts: Callable[[Any, Any], bool]
    mask: Callable[[Any, RequestHosts, Any], np.ndarray]


def _always(filter_, spec) -> bool:
    return True


def _everyone(filter_, hosts: RequestHosts, spec) -> np.ndarray:
    return np.ones(len(hosts), dtype=bool)


def _db_servicegroup(filter_, spec) -> bool:
    return CONF.servicegroup_driver == "db"


def _service_up(filter_, hosts: RequestHosts, spec) -> np.ndarray:
    """ComputeFilter with nova's ``db`` servicegroup driver (see
    ``vector_filtering.compute_service_up``)."""
    down = hosts.flags("disabled") | hosts.flags("forced_down")
    elapsed = microseconds(timeutils.utcnow()) - hosts.flags("heartbeat_us")
    # microseconds / 1e6 is timedelta.total_seconds(), rounded as it is
    return ~down & (np.abs(elapsed) / 1e6 <= CONF.service_down_time)


def _reads_node_values(filter_, spec) -> bool:
    """The capabilities the flavor names are the built state's (a path
    into a per-request attribute is read on objects)."""
    if "extra_specs" not in spec.flavor:
        return True
    return all(path[0] not in PER_REQUEST
               for _, path, _ in vector_filtering.capability_specs(spec.flavor))


def _on_states(kernel: vector_filtering.Kernel) -> Callable[[Any, RequestHosts, Any], np.ndarray]:
    """A filter kernel on objects, run on the hosts' built (or consumed)
    states."""
    def mask(filter_, hosts: RequestHosts, spec) -> np.ndarray:
        return kernel(filter_, hosts.states(), spec)
    return mask


def _on_aggregates(kernel: vector_filtering.Kernel) -> Callable[[Any, RequestHosts, Any], np.ndarray]:
    """A filter kernel that reads only a host's aggregates, run once per
    aggregate group."""
    def mask(filter_, hosts: RequestHosts, spec) -> np.ndarray:
        # only the groups of these hosts: another group's metadata may make
        # the filter raise where nova's, on these hosts, would not
        present, at = np.unique(hosts.group_of(), return_inverse=True)
        stand_ins = hosts.groups.stand_ins
        return kernel(filter_, [stand_ins[g] for g in present.tolist()], spec)[at]
    return mask


def _no_anti_affinity_group(filter_, spec) -> bool:
    group = spec.instance_group
    return filter_.policy_name != (group.policy if group else None)


def _in_affinity_group(filter_, hosts: RequestHosts, spec) -> np.ndarray:
    """ServerGroupAffinityFilter: for an affinity group with hosts, the host
    is one of them (by name)."""
    group = spec.instance_group
    if filter_.policy_name not in (group.policies if group else []) or not group.hosts:
        return np.ones(len(hosts), dtype=bool)
    numbers = hosts.columns.host_numbers
    wanted = [numbers[h] for h in set(group.hosts) if h in numbers]
    return np.isin(hosts.columns.column("host_number")[hosts.rows], wanted)


def _no_hint(hint: str) -> Callable[[Any, Any], bool]:
    def accepts(filter_, spec) -> bool:
        return not spec.get_scheduler_hint(hint)
    return accepts


def _below(name: str, option: str) -> Callable[[Any, RequestHosts, Any], np.ndarray]:
    def mask(filter_, hosts: RequestHosts, spec) -> np.ndarray:
        return hosts.numbers(name) < CONF.filter_scheduler[option]
    return mask


FILTERS: dict[type, ColumnFilter] = {
    all_hosts_filter.AllHostsFilter: ColumnFilter(_always, _everyone),
    compute_filter.ComputeFilter: ColumnFilter(_db_servicegroup, _service_up),
    compute_capabilities_filter.ComputeCapabilitiesFilter: ColumnFilter(
        _reads_node_values, _on_states(vector_filtering.compute_capabilities)),
    image_props_filter.ImagePropertiesFilter: ColumnFilter(
        _always, _on_states(vector_filtering.image_properties)),
    affinity_filter.ServerGroupAntiAffinityFilter: ColumnFilter(
        _no_anti_affinity_group, _everyone),
    affinity_filter.ServerGroupAffinityFilter: ColumnFilter(_always, _in_affinity_group),
    affinity_filter.SameHostFilter: ColumnFilter(_no_hint("same_host"), _everyone),
    affinity_filter.DifferentHostFilter: ColumnFilter(_no_hint("different_host"), _everyone),
    num_instances_filter.NumInstancesFilter: ColumnFilter(
        _always, _below("num_instances", "max_instances_per_host")),
    io_ops_filter.IoOpsFilter: ColumnFilter(
        _always, _below("num_io_ops", "max_io_ops_per_host")),
    aggregate_instance_extra_specs.AggregateInstanceExtraSpecsFilter: ColumnFilter(
        _always, _on_aggregates(vector_filtering.aggregate_extra_specs)),
    aggregate_multitenancy_isolation.AggregateMultiTenancyIsolation: ColumnFilter(
        _always, _on_aggregates(vector_filtering.aggregate_tenants)),
    aggregate_image_properties_isolation.AggregateImagePropertiesIsolation: ColumnFilter(
        _always, _on_aggregates(vector_filtering.aggregate_image_isolation)),
}


# ----------------------------------------------------------------- weighers
@dataclasses.dataclass(frozen=True)
class ColumnWeigher:
    """One of nova's weighers on columns: whether it ``accepts`` a request,
    and its raw weights per host (its multiplier's option and sign are its
    ``vector_weighing.KERNELS`` entry's)."""

    accepts: Callable[[Any, Any], bool]
    raw: Callable[[Any, RequestHosts, Any], np.ndarray]


def _column(name: str) -> Callable[[Any, RequestHosts, Any], np.ndarray]:
    def raw(weigher, hosts: RequestHosts, spec) -> np.ndarray:
        return hosts.numbers(name)
    return raw


def _free_vcpus(weigher, hosts: RequestHosts, spec) -> np.ndarray:
    return (hosts.numbers("vcpus_total") * hosts.numbers("cpu_allocation_ratio")
            - hosts.numbers("vcpus_used"))


def _zeros(weigher, hosts: RequestHosts, spec) -> np.ndarray:
    return np.zeros(len(hosts))


def _not_its_group(weigher, spec) -> bool:
    group = spec.instance_group
    return not group or group.policy != weigher.policy_name


def _preferred_cell(weigher, hosts: RequestHosts, spec) -> np.ndarray:
    """CrossCellWeigher: 1 in the preferred cell of a cross-cell move, -1
    elsewhere; 0 for any other request."""
    if not vector_weighing.cross_cell_move(spec):
        return np.zeros(len(hosts))
    preferred = hosts.columns.cell_numbers.get(spec.requested_destination.cell.uuid, -1)
    return np.where(hosts.columns.column("cell")[hosts.rows] == preferred, 1.0, -1.0)


def _pci_kept_free(weigher, hosts: RequestHosts, spec) -> np.ndarray:
    return vector_weighing.devices_kept_free(hosts.pci_free())


def _no_metrics(weigher, spec) -> bool:
    return not weigher.setting


def _image_props_off(weigher, spec) -> bool:
    return CONF.filter_scheduler.image_props_weight_multiplier == 0.0


WEIGHERS: dict[type, ColumnWeigher] = {
    ram.RAMWeigher: ColumnWeigher(_always, _column("free_ram_mb")),
    disk.DiskWeigher: ColumnWeigher(_always, _column("free_disk_mb")),
    cpu.CPUWeigher: ColumnWeigher(_always, _free_vcpus),
    io_ops.IoOpsWeigher: ColumnWeigher(_always, _column("num_io_ops")),
    num_instances.NumInstancesWeigher: ColumnWeigher(_always, _column("num_instances")),
    compute.BuildFailureWeigher: ColumnWeigher(_always, _column("failed_builds")),
    hypervisor_version.HypervisorVersionWeigher: ColumnWeigher(
        _always, _column("hypervisor_version")),
    affinity.ServerGroupSoftAffinityWeigher: ColumnWeigher(_not_its_group, _zeros),
    affinity.ServerGroupSoftAntiAffinityWeigher: ColumnWeigher(_not_its_group, _zeros),
    cross_cell.CrossCellWeigher: ColumnWeigher(_always, _preferred_cell),
    pci.PCIWeigher: ColumnWeigher(_always, _pci_kept_free),
    metrics.MetricsWeigher: ColumnWeigher(_no_metrics, _zeros),
    image_props.ImagePropertiesWeigher: ColumnWeigher(_image_props_off, _zeros),
}


# ------------------------------------------------------------------ ranking
class NotOnColumns(Exception):
    """This request's hosts are ranked on objects (a row that is not all
    numbers, a kernel that raised)."""


class ColumnRanking:
    """nova's filters and weighers of one host manager for one request,
    on the columns of its ``HostStateView`` (see the module's text)."""

    def __init__(self, manager, spec, filters: list[tuple[Any, ColumnFilter]],
                 weighers: list[tuple[Any, ColumnWeigher, vector_weighing.Kernel]]):
        self.manager = manager
        self.spec = spec
        self.filters = filters
        self.weighers = weighers
        #: the columns and the cells that answered, read once per call
        self._columns: HostColumns | None = None
        self._answered: list[int] = []

    @classmethod
    def planned(cls, manager, spec) -> "ColumnRanking | None":
        """The column ranking of ``spec`` by ``manager``'s enabled filters
        and weighers, or None when one of them, or the request, needs
        objects."""
        if scheduler_utils.request_is_rebuild(spec) or spec.force_hosts or \
                spec.force_nodes:
            return None
        destination = spec.requested_destination
        if destination is not None and 'host' in destination:
            return None
        filters = []
        for filter_ in manager.enabled_filters:
            column = FILTERS.get(type(filter_))
            if column is None or not column.accepts(filter_, spec):
                return None
            filters.append((filter_, column))
        weighers = []
        for weigher in manager.weighers:
            column_weigher = WEIGHERS.get(type(weigher))
            if column_weigher is None or not column_weigher.accepts(weigher, spec):
                return None
            weighers.append((weigher, column_weigher, vector_weighing.KERNELS[type(weigher)]))
        return cls(manager, spec, filters, weighers)

    def hosts(self, context, rows: np.ndarray, cells: Sequence,
              consumed: dict[int, Any],
              arrived: datetime.datetime | None = None) -> RequestHosts:
        """The hosts of ``rows`` (a candidate's row, -1 for none: see
        ``candidate_rows``) nova's host manager would read for this request
        (in one of ``cells``), each once, in row order."""
        columns = self.columns(context, cells, arrived)
        rows = rows[rows >= 0]
        if len(rows) and columns.column("irregular")[rows].any():
            raise NotOnColumns("a host state holds a value that is not a number")
        read = np.zeros(columns.size, dtype=bool)
        read[rows] = True
        rows = np.flatnonzero(read)
        return RequestHosts(columns, rows, self._aggregate_groups(columns), consumed,
                            NovaOrder(columns, rows))

    def candidate_rows(self, context, cands: Sequence[Candidate], cells: Sequence,
                       arrived: datetime.datetime | None = None) -> np.ndarray:
        """Per candidate, its host's row in the columns, -1 when nova's
        host manager would not read it for this request (no live host
        state in one of ``cells``). Candidates that know their roots' rows
        in the engine's index are mapped through them, without a look-up
        per root."""
        columns = self.columns(context, cells, arrived)
        lazy = cands if isinstance(cands, LazyCandidates) else None
        known = lazy.index_rows() if lazy is not None else None
        if lazy is None or known is None:
            rows = columns.rows(roots_of(cands))
        else:
            rows = columns.rows_of_index(known.uuids, known.rows)
            unknown = np.flatnonzero(known.rows < 0).tolist()
            if unknown:     # a move's own candidates: a few
                rows[unknown] = columns.rows(list(map(lazy.root_at, unknown)))
        held = np.flatnonzero(rows >= 0)
        answered = np.zeros(len(columns.cell_numbers) + 1, dtype=bool)
        answered[self._answered] = True
        rows[held[~answered[columns.column("cell")[rows[held]]]]] = -1
        return rows

    def columns(self, context, cells: Sequence,
                arrived: datetime.datetime | None = None) -> HostColumns:
        """The view's columns, brought up to date at the call's first ask
        (``cells`` refreshed unless they were after the call ``arrived``)."""
        if self._columns is None:
            self._columns, self._answered = self.manager.view.refreshed_columns(
                context, cells, arrived)
        return self._columns

    def _aggregate_groups(self, columns: HostColumns) -> AggregateGroups:
        """The hosts' aggregate groups, made again when nova's aggregate maps
        changed or a host name was added."""
        key = (self.manager.aggregates_version, len(columns.lowered_hosts))
        cached = self.manager.aggregate_groups
        if cached is None or cached[:2] != key:
            cached = self.manager.aggregate_groups = (*key, AggregateGroups(self.manager, columns))
        return cached[2]

    def filtered(self, hosts: RequestHosts, index: int) -> RequestHosts:
        """The hosts nova's ``get_filtered_hosts`` keeps for instance
        ``index`` of the request, in order."""
        ignore = self.spec.ignore_hosts or []
        if ignore:
            numbers = [n for name in {h.lower() for h in ignore}
                       for n in hosts.columns.numbers_of_lowered.get(name, ())]
            hosts = hosts.take(~np.isin(
                hosts.columns.column("host_number")[hosts.rows], numbers))
        for filter_, column in self.filters:
            if not len(hosts):
                break
            if not filter_.run_filter_for_index(index):
                continue
            try:
                mask = column.mask(filter_, hosts, self.spec)
            except Exception as exc:
                raise NotOnColumns(f"{type(filter_).__name__} raised {exc!r}") from exc
            hosts = hosts.take(mask)
        return hosts

    def weights(self, hosts: RequestHosts) -> np.ndarray:
        """Per host, its total weight by nova's weighers (0 for one host)."""
        totals = np.zeros(len(hosts))
        if len(hosts) <= 1:
            return totals
        for weigher, column, kernel in self.weighers:
            multipliers = hosts.groups.multipliers(
                hosts, kernel.key, CONF[kernel.group][kernel.option])
            raw = vector_weighing.clamped(column.raw(weigher, hosts, self.spec),
                                          weigher.minval, weigher.maxval)
            if kernel.sign != 1.0:
                multipliers = kernel.sign * multipliers
            with np.errstate(all="ignore"):     # an inf multiplier times 0: NaN
                totals += multipliers * vector_weighing.normalized(
                    raw, weigher.minval, weigher.maxval)
        return totals

    def best_first(self, hosts: RequestHosts, totals: np.ndarray) -> list[int]:
        """Positions in ``hosts`` by weight ``totals``, highest first, equal
        weights in nova's order (as nova's stable sort of its hosts)."""
        if np.isnan(totals).any():     # Python's sort, as nova's, on NaN keys
            in_nova = hosts.in_nova_order()
            weights = totals[in_nova].tolist()
            return in_nova[sorted(range(len(weights)), key=weights.__getitem__,
                                  reverse=True)].tolist()
        return weigh.best_first(
            totals, lambda tied: (hosts.nova_order.places(hosts.rows[tied]),)).tolist()

    def head_first(self, hosts: RequestHosts, totals: np.ndarray, count: int) -> np.ndarray:
        """``best_first``'s first hosts: those weighing at least its
        ``count``-th (1 <= count <= len, no NaN weight), in its order. nova's
        order is read only if they tie."""
        kth = weigh.kth_largest(totals, count)
        head = np.flatnonzero(totals >= kth)
        return head[weigh.best_first(
            totals[head], lambda tied: (hosts.nova_order.places(hosts.rows[head[tied]]),))]

    def place(self, hosts: RequestHosts, totals: np.ndarray, at: int) -> int:
        """Host ``at``'s place in ``best_first`` (no NaN weight), without
        ordering the others: nova's order is read only if it ties."""
        weight = totals[at]
        above = int(np.count_nonzero(totals > weight))
        tied = np.flatnonzero(totals == weight)
        if len(tied) == 1:
            return above
        places = hosts.nova_order.places(hosts.rows[tied])
        return above + int(np.count_nonzero(places < places[np.searchsorted(tied, at)]))
