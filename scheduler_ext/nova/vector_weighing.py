"""nova's enabled host weighers over numpy arrays, equal to nova's own
weighing (``HostManager.get_weighed_hosts``).

nova weighs in weigher order: each weigher's raw weight per host, clamped
to the weigher's ``minval``/``maxval``, is normalised to [0, 1] over the
hosts weighed (bounds: ``minval``/``maxval`` where set, else the min/max
of the raw weights; all 0 when the bounds are equal), multiplied by the
host's multiplier (an aggregate's metadata value under the option's name,
the least of its aggregates', or nova's option when none or one does not
parse as a float) and added to the host's weight (starting at 0.0). The
hosts are then sorted by weight, highest first, stable: equal weights keep
the order the hosts were handed in. One host or none is not weighed.

A weigher whose exact class is in ``KERNELS`` is computed here on arrays
(same IEEE operations in the same order, so the weights are nova's bit for
bit); any other (a subclass, an operator's weigher, a test fixture) runs
as nova runs it: its ``weigh_objects``, nova's ``normalize``, its
``weight_multiplier`` per host.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import nova.conf
import numpy as np
from nova import exception as nova_exception
from nova import weights as nova_weights
from nova.scheduler import weights as host_weights
from nova.scheduler.weights import (affinity, compute, cpu, cross_cell, disk,
                                    hypervisor_version, image_props, io_ops,
                                    metrics, num_instances, pci, ram)
from oslo_log import log as logging

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

#: (weigher, hosts, request spec, per-host multipliers) -> raw weights
RawWeights = Callable[[Any, Sequence, Any, np.ndarray], np.ndarray]


@dataclasses.dataclass(frozen=True)
class Kernel:
    """How one of nova's weighers is computed on arrays: ``raw`` weights,
    and the multiplier (nova's option ``group.option``, or the aggregate
    metadata value under ``key``), times ``sign``."""

    raw: RawWeights
    group: str
    option: str
    key: str
    sign: float = 1.0


def _scheduler_kernel(raw: RawWeights, option: str, sign: float = 1.0) -> Kernel:
    """A kernel whose multiplier is ``[filter_scheduler] option`` (and the
    aggregate metadata key of that name)."""
    return Kernel(raw, "filter_scheduler", option, option, sign)


def _attribute(name: str) -> RawWeights:
    """Raw weights: the hosts' ``name`` attribute, as float64."""
    read = operator.attrgetter(name)

    def raw(weigher, hosts, spec, multipliers) -> np.ndarray:
        return np.fromiter(map(read, hosts), dtype=float, count=len(hosts))
    return raw


def _free_vcpus(weigher, hosts, spec, multipliers) -> np.ndarray:
    """VCPUs total times the allocation ratio, less those used."""
    n = len(hosts)
    total = np.fromiter((h.vcpus_total for h in hosts), dtype=float, count=n)
    ratio = np.fromiter((h.cpu_allocation_ratio for h in hosts), dtype=float, count=n)
    used = np.fromiter((h.vcpus_used for h in hosts), dtype=float, count=n)
    return total * ratio - used


def _hypervisor_version(weigher, hosts, spec, multipliers) -> np.ndarray:
    """The hypervisor version, 0 where unset."""
    return np.fromiter((h.hypervisor_version or 0 for h in hosts),
                       dtype=float, count=len(hosts))


def _group_members_on_host(weigher, hosts, spec, multipliers) -> np.ndarray:
    """How many of the request's server group members each host runs
    (negated for soft anti-affinity), when the group's policy is the
    weigher's; 0 otherwise."""
    n = len(hosts)
    group = spec.instance_group
    if not group or group.policy != weigher.policy_name:
        return np.zeros(n)
    members = set(group.members)
    counts = np.fromiter((len(members.intersection(h.instances.keys())) for h in hosts),
                         dtype=float, count=n)
    return -counts if type(weigher) is affinity.ServerGroupSoftAntiAffinityWeigher \
        else counts


def cross_cell_move(spec) -> bool:
    """Whether ``spec`` is a cross-cell move with a preferred cell (the
    requested destination's)."""
    return bool('requested_destination' in spec and spec.requested_destination and
                'cell' in spec.requested_destination and
                spec.requested_destination.cell and
                spec.requested_destination.allow_cross_cell_move)


def _in_preferred_cell(weigher, hosts, spec, multipliers) -> np.ndarray:
    """For a cross-cell move: 1 in the preferred cell, -1 elsewhere; 0
    for any other request."""
    n = len(hosts)
    if not cross_cell_move(spec):
        return np.zeros(n)
    preferred = spec.requested_destination.cell.uuid
    return np.fromiter((1.0 if h.cell_uuid == preferred else -1.0 for h in hosts),
                       dtype=float, count=n)


_count = operator.itemgetter("count")


def _pci_devices_kept_free(weigher, hosts, spec, multipliers) -> np.ndarray:
    """``MAX_DEVS`` less the host's free PCI devices (at most one less):
    hosts without devices weigh most."""
    pools = [h.pci_stats.pools if h.pci_stats else () for h in hosts]
    free = np.fromiter(map(sum, map(map, itertools.repeat(_count), pools)),
                       dtype=float, count=len(hosts))
    return devices_kept_free(free)


def devices_kept_free(free: np.ndarray) -> np.ndarray:
    """The PCI weigher's raw weight of hosts with ``free`` PCI devices:
    ``MAX_DEVS`` less them (at most one less)."""
    return pci.MAX_DEVS - np.minimum(free, pci.MAX_DEVS - 1)


def _metric_value(host, setting, multiplier: float) -> float:
    """One host's weighted sum of the metrics in ``setting`` ((name,
    ratio) pairs); a missing one raises when ``[metrics] required``, else
    gives ``weight_of_unavailable`` unless its ratio or the multiplier is 0."""
    by_name = {m.name: m for m in host.metrics or []}
    value = 0.0
    for name, ratio in setting:
        if name in by_name:
            value += by_name[name].value * ratio
        elif CONF.metrics.required:
            raise nova_exception.ComputeHostMetricNotFound(
                host=host.host, node=host.nodename, name=name)
        elif ratio * multiplier != 0:
            return CONF.metrics.weight_of_unavailable
    return value


def _metrics(weigher, hosts, spec, multipliers) -> np.ndarray:
    """The metrics weigher's weighted sums (0 for all when none is set)."""
    if not weigher.setting:
        return np.zeros(len(hosts))
    return np.array([_metric_value(h, weigher.setting, m)
                     for h, m in zip(hosts, multipliers.tolist())], dtype=float)


def _image_properties(weigher, hosts, spec, multipliers) -> np.ndarray:
    """0 for all while nova's option disables the weigher (its default);
    else nova's own weigher (it reads the hosts' instances from the cell
    database)."""
    if CONF.filter_scheduler.image_props_weight_multiplier == 0.0:
        return np.zeros(len(hosts))
    weighed = [host_weights.WeighedHost(h, 0.0) for h in hosts]
    return np.array(weigher.weigh_objects(weighed, spec), dtype=float)


#: nova's weighers computed here, by exact class (a subclass runs as nova's)
KERNELS: dict[type, Kernel] = {
    ram.RAMWeigher: _scheduler_kernel(
        _attribute("free_ram_mb"), "ram_weight_multiplier"),
    disk.DiskWeigher: _scheduler_kernel(
        _attribute("free_disk_mb"), "disk_weight_multiplier"),
    cpu.CPUWeigher: _scheduler_kernel(_free_vcpus, "cpu_weight_multiplier"),
    io_ops.IoOpsWeigher: _scheduler_kernel(
        _attribute("num_io_ops"), "io_ops_weight_multiplier"),
    num_instances.NumInstancesWeigher: _scheduler_kernel(
        _attribute("num_instances"), "num_instances_weight_multiplier"),
    compute.BuildFailureWeigher: _scheduler_kernel(
        _attribute("failed_builds"), "build_failure_weight_multiplier", sign=-1.0),
    hypervisor_version.HypervisorVersionWeigher: _scheduler_kernel(
        _hypervisor_version, "hypervisor_version_weight_multiplier"),
    affinity.ServerGroupSoftAffinityWeigher: _scheduler_kernel(
        _group_members_on_host, "soft_affinity_weight_multiplier"),
    affinity.ServerGroupSoftAntiAffinityWeigher: _scheduler_kernel(
        _group_members_on_host, "soft_anti_affinity_weight_multiplier"),
    cross_cell.CrossCellWeigher: _scheduler_kernel(
        _in_preferred_cell, "cross_cell_move_weight_multiplier"),
    pci.PCIWeigher: _scheduler_kernel(_pci_devices_kept_free, "pci_weight_multiplier"),
    metrics.MetricsWeigher: Kernel(
        _metrics, "metrics", "weight_multiplier", "metrics_weight_multiplier"),
    image_props.ImagePropertiesWeigher: _scheduler_kernel(
        _image_properties, "image_props_weight_multiplier"),
}


def aggregate_multiplier(aggregates: Sequence, key: str, default: float) -> float:
    """A host's multiplier: the least of its aggregates' ``key`` values
    (as floats), ``default`` when none has the key or one does not parse."""
    values = {agg.metadata[key] for agg in aggregates if key in agg.metadata}
    if not values:
        return default
    try:
        return min([float(v) for v in values])
    except ValueError as exc:
        LOG.warning("aggregate metadata %s is not a number (%s): the host "
                    "weighs with the configured multiplier %s", key, exc, default)
        return default


_aggregates_of = operator.attrgetter("aggregates")


class AggregateSets:
    """The hosts grouped by their aggregates (the same aggregate objects in
    the same order): a multiplier is read once per group."""

    def __init__(self, hosts: Sequence):
        lists = list(map(_aggregates_of, hosts))
        keys = list(map(tuple, map(map, itertools.repeat(id), lists)))
        first: dict[tuple[int, ...], int] = {}
        #: per host, its group
        self.group_of = np.array([first.setdefault(k, len(first)) for k in keys],
                                 dtype=np.intp)
        one_of = dict(zip(keys, lists))
        #: per group, its aggregates
        self.groups: list[Sequence] = [one_of[k] for k in first]

    def multipliers(self, key: str, default: float) -> np.ndarray:
        """Per host, its multiplier for metadata ``key`` (float64)."""
        per_group = np.array([aggregate_multiplier(aggs, key, default)
                              for aggs in self.groups], dtype=float)
        return per_group[self.group_of]


def clamped(raw: np.ndarray, minval, maxval) -> np.ndarray:
    """``raw`` held within the weigher's bounds (None: unbounded), as
    nova's ``max``/``min`` do it (a NaN stays)."""
    if minval is not None:
        raw = np.where(minval > raw, float(minval), raw)
    if maxval is not None:
        raw = np.where(maxval < raw, float(maxval), raw)
    return raw


def normalized(raw: np.ndarray, minval, maxval) -> np.ndarray:
    """``raw`` mapped onto [0, 1] between the bounds (the weigher's, else
    the min/max of ``raw``); all 0 when the bounds are equal. With a NaN
    in ``raw`` (where Python's ``max`` depends on the order) nova's
    ``normalize`` answers."""
    if np.isnan(raw).any():
        return np.array(list(nova_weights.normalize(raw.tolist(), minval, maxval)),
                        dtype=float)
    hi = float(maxval) if maxval is not None else raw.max()
    lo = float(minval) if minval is not None else raw.min()
    if lo == hi:
        return np.zeros(len(raw))
    with np.errstate(all="ignore"):     # inf bounds: NaN/0 as in Python floats
        return (raw - lo) / (hi - lo)


class VectorWeighing:
    """nova's ``get_weighed_hosts`` for one host manager's ``weighers`` (in
    nova's configured order), computed on arrays where ``KERNELS`` knows
    the weigher."""

    def __init__(self, weighers: Sequence[Any]):
        self.weighers = list(weighers)
        #: per weigher, its kernel, or None: nova's own code
        self.kernels: list[Kernel | None] = [KERNELS.get(type(w)) for w in self.weighers]

    def weighed_hosts(self, hosts: Sequence, spec) -> list:
        """nova's ``WeighedHost`` per host, best first, weights and order
        as nova's ``get_weighed_hosts(hosts, spec)``."""
        hosts = list(hosts)
        if len(hosts) <= 1:
            return [host_weights.WeighedHost(h, 0.0) for h in hosts]
        totals = self.weights(hosts, spec)
        if np.isnan(totals).any():     # Python's sort, as nova's, on NaN keys
            weights = totals.tolist()
            order = sorted(range(len(hosts)), key=weights.__getitem__, reverse=True)
        else:
            order = np.argsort(-totals, kind="stable").tolist()
        return list(map(host_weights.WeighedHost, map(hosts.__getitem__, order),
                        totals[order].tolist()))

    def weights(self, hosts: Sequence, spec) -> np.ndarray:
        """Per host (in ``hosts``' order, at least two), its total weight."""
        totals = np.zeros(len(hosts))
        aggregate_sets: AggregateSets | None = None
        for weigher, kernel in zip(self.weighers, self.kernels):
            if kernel is None:
                totals += self.nova_scores(weigher, hosts, spec, totals)
                continue
            if aggregate_sets is None:
                aggregate_sets = AggregateSets(hosts)
            multipliers = aggregate_sets.multipliers(
                kernel.key, CONF[kernel.group][kernel.option])
            raw = clamped(kernel.raw(weigher, hosts, spec, multipliers),
                          weigher.minval, weigher.maxval)
            if kernel.sign != 1.0:
                multipliers = kernel.sign * multipliers
            with np.errstate(all="ignore"):     # an inf multiplier times 0: NaN
                totals += multipliers * normalized(raw, weigher.minval, weigher.maxval)
        return totals

    @staticmethod
    def nova_scores(weigher, hosts: Sequence, spec, totals: np.ndarray) -> np.ndarray:
        """One weigher's score per host, by nova's own code as nova calls
        it (on ``WeighedHost``s carrying the weights so far)."""
        weighed = [host_weights.WeighedHost(h, w) for h, w in zip(hosts, totals.tolist())]
        raw = weigher.weigh_objects(weighed, spec)
        weights = nova_weights.normalize(raw, minval=weigher.minval, maxval=weigher.maxval)
        return np.array([weigher.weight_multiplier(h) * w for h, w in zip(hosts, weights)],
                        dtype=float)
