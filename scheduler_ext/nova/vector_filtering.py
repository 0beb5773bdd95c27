"""nova's enabled host filters over numpy arrays, equal to nova's own
filtering (``HostFilterHandler.get_filtered_objects``, which
``HostManager.get_filtered_hosts`` calls after its ignore, force and
requested-destination handling).

nova runs its filters in the configured order, each on the hosts the ones
before it kept, which keep the order they were handed in. A filter whose
``run_filter_for_index(index)`` is False (a once-per-request filter for
the second instance of a request and later) is skipped; a filter that
keeps no host ends the run (the filters after it do not run); a filter
whose ``filter_all`` answers None ends it with None.

A filter whose exact class is in ``KERNELS`` is computed here: one boolean
per host, read from the per-host values the filter reads, evaluated once
per distinct value (a capability, a set of aggregates, a host's supported
instances) and spread over the hosts with numpy. A filter that does not
run on rebuilds keeps every host for a rebuild, as in nova. A kernel that
raises hands its filter to nova's own code for that call, which raises
(or not) as nova does: a kernel raises wherever nova's filter would, and
may raise where it would not. Any other filter (a subclass of one of
these, NUMATopologyFilter, PciPassthroughFilter, an operator's) runs its
own ``filter_all`` in its place in the list.
"""

from __future__ import annotations

import collections
import datetime
import itertools
import operator
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Protocol

import nova.conf
import numpy as np
from nova.objects import fields
from nova.scheduler import filters as nova_filters
from nova.scheduler import utils as scheduler_utils
from nova.scheduler.filters import (affinity_filter, aggregate_image_properties_isolation,
                                    aggregate_instance_extra_specs,
                                    aggregate_multitenancy_isolation, all_hosts_filter,
                                    compute_capabilities_filter, compute_filter,
                                    extra_specs_ops, image_props_filter, io_ops_filter,
                                    num_instances_filter)
from nova.scheduler.filters import utils as filter_utils
from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import timeutils, versionutils

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)


class Kernel(Protocol):
    """One of nova's filters computed on arrays: per host of ``hosts`` (at
    least one), whether it passes; raises wherever nova's filter would."""

    def __call__(self, filter_: Any, hosts: Sequence[Any], spec: Any) -> np.ndarray: ...


def grouped(keys: Iterable[Hashable]) -> tuple[np.ndarray, list[int]]:
    """Per item, the number of its key among the distinct keys (numbered
    in order of first sight), and per distinct key the index of its first
    item."""
    numbers: dict[Hashable, int] = {}
    firsts: list[int] = []
    out: list[int] = []
    for i, key in enumerate(keys):
        number = numbers.get(key)
        if number is None:
            number = numbers[key] = len(firsts)
            firsts.append(i)
        out.append(number)
    return np.array(out, dtype=np.intp), firsts


def by_key(items: Sequence[Any], keys: Iterable[Hashable],
           passes: Callable[[Any], Any]) -> np.ndarray:
    """Per item, the truth of ``passes`` on the first item with its key:
    ``passes`` runs once per distinct key (it must read nothing else of
    an item than what its key holds)."""
    numbers, firsts = grouped(keys)
    verdicts = np.array([bool(passes(items[i])) for i in firsts], dtype=bool)
    return verdicts[numbers]


def _aggregate_ids(host) -> tuple[int, ...]:
    return tuple(map(id, host.aggregates))


def by_aggregates(hosts: Sequence[Any], passes: Callable[[Any], Any]) -> np.ndarray:
    """Per host, the truth of ``passes`` on a host with the same aggregate
    objects in the same order (``passes`` reads only a host's aggregates)."""
    return by_key(hosts, map(_aggregate_ids, hosts), passes)


def _everyone(hosts: Sequence[Any]) -> np.ndarray:
    return np.ones(len(hosts), dtype=bool)


def all_hosts(filter_, hosts, spec) -> np.ndarray:
    """AllHostsFilter: every host."""
    return _everyone(hosts)


_service_of = operator.attrgetter("service")


def _naive_utc(beat: Any) -> datetime.datetime:
    """A heartbeat as a naive UTC datetime: text (a service sent over RPC)
    in oslo's time format, or a datetime with or without its UTC zone."""
    if isinstance(beat, str):
        return timeutils.parse_strtime(beat)
    return beat.replace(tzinfo=None)


def compute_service_up(filter_, hosts, spec) -> np.ndarray:
    """ComputeFilter: the host's service is enabled and up. With nova's
    ``db`` servicegroup driver, computed here: not forced down, and its
    last heartbeat (``last_seen_up``, else ``created_at``; UTC) at most
    ``service_down_time`` seconds from now, either way. With another
    driver the servicegroup API answers per host."""
    services = list(map(_service_of, hosts))
    n = len(services)
    if CONF.servicegroup_driver != "db":
        service_is_up = filter_.servicegroup_api.service_is_up
        return np.fromiter((not s["disabled"] and bool(service_is_up(s))
                            for s in services), dtype=bool, count=n)
    # a host state's service is a ReadOnlyDict (a UserDict): its ``data``
    # reads at C speed, its own methods in Python
    rows = [s.data if isinstance(s, collections.UserDict) else s for s in services]
    down = np.fromiter((bool(r["disabled"] or r.get("forced_down")) for r in rows),
                       dtype=bool, count=n)
    now = timeutils.utcnow()
    elapsed = np.fromiter(
        ((now - _naive_utc(r.get("last_seen_up") or r["created_at"])).total_seconds()
         for r in rows), dtype=float, count=n)      # seconds, as nova's
    return ~down & (np.abs(elapsed) <= CONF.service_down_time)


def _capability(host, path: Sequence[str], parsed: dict[str, Any]) -> Any:
    """The value at ``path`` from the host: each name an attribute (a
    None one read from the object's ``stats``), a key of a dict, or a key
    of a JSON string's dict; None when a step finds nothing. ``parsed``
    caches JSON strings already loaded (None: not JSON)."""
    value = host
    for name in path:
        if isinstance(value, str):
            if value not in parsed:
                try:
                    parsed[value] = jsonutils.loads(value)
                except ValueError:
                    parsed[value] = None
            value = parsed[value]
            if value is None:
                return None
        if isinstance(value, dict):
            value = value.get(name)
        else:
            found = getattr(value, name, None)
            try:
                value = value.stats.get(name) if found is None else found
            except AttributeError:
                return None
        if value is None:
            return None
    return value


def capability_specs(flavor) -> list[tuple[str, tuple[str, ...], bool]]:
    """(requirement, path, scoped) per flavor extra spec the capabilities
    filter reads, in the flavor's order: ``capabilities:``-scoped keys, and
    unscoped ones (which apply only to a host with that attribute or
    stat). ``hw:maxphysaddr_bits`` reads as a
    ``capabilities:cpu_info:maxphysaddr:bits`` minimum."""
    specs = dict(flavor.extra_specs)
    bits = specs.get("hw:maxphysaddr_bits")
    if bits is not None:
        specs["capabilities:cpu_info:maxphysaddr:bits"] = ">= " + bits
        del specs["hw:maxphysaddr_bits"]
    out = []
    for key, requirement in specs.items():
        path = key.split(":")
        if len(path) == 1:
            out.append((requirement, tuple(path), False))
        elif path[0] == "capabilities":
            out.append((requirement, tuple(path[1:]), True))
    return out


def _applies(host, name: str) -> bool:
    return hasattr(host, name) or name in getattr(host, "stats", {})


def compute_capabilities(filter_, hosts, spec) -> np.ndarray:
    """ComputeCapabilitiesFilter: every capability the flavor's extra specs
    name matches its requirement (``extra_specs_ops.match`` on the value's
    text), evaluated once per distinct text; a missing one fails."""
    flavor = spec.flavor
    passed = _everyone(hosts)
    if "extra_specs" not in flavor:
        return passed
    parsed: dict[str, Any] = {}
    for requirement, path, scoped in capability_specs(flavor):
        alive = np.flatnonzero(passed).tolist()
        if not scoped:
            alive = [i for i in alive if _applies(hosts[i], path[0])]
        texts = [None if v is None else str(v) for v in
                 (_capability(hosts[i], path, parsed) for i in alive)]
        matched = by_key(texts, texts, lambda text: text is not None and
                         extra_specs_ops.match(text, requirement))
        passed[alive] = matched
    return passed


def _hashable_offers(offers) -> Hashable:
    """A host's supported instances as a key ((arch, hv type, vm mode) per
    entry; a falsy value as the empty tuple)."""
    if not offers:
        return ()
    return tuple(tuple(o) if isinstance(o, list) else o for o in offers)


def image_properties(filter_, hosts, spec) -> np.ndarray:
    """ImagePropertiesFilter: when the image asks for an architecture
    (else ``image_properties_default_architecture``), a hypervisor type or
    a VM mode, one of the host's supported instances offers all it asks,
    with the hypervisor version the image requires (when both are set),
    and the host's CPU address bits are at least the image's (when both
    are set). Evaluated once per distinct (supported instances, version)."""
    props = spec.image.properties if spec.image else {}
    wanted = [p for p in (
        fields.Architecture.canonicalize(props.get(
            "hw_architecture", CONF.filter_scheduler.image_properties_default_architecture)),
        fields.HVType.canonicalize(props.get("img_hv_type")),
        fields.VMMode.canonicalize(props.get("hw_vm_mode"))) if p]
    if not wanted:
        return _everyone(hosts)
    required = props.get("img_hv_requested_version")
    predicate = versionutils.VersionPredicate(required) if required else None

    def offered(host) -> bool:
        offers, version = host.supported_instances, host.hypervisor_version
        if not offers or not any(all(p in offer for p in wanted) for offer in offers):
            return False
        return predicate is None or not version or predicate.satisfied_by(
            versionutils.convert_version_to_str(version))

    keys = ((_hashable_offers(h.supported_instances),
             h.hypervisor_version if predicate is not None else None) for h in hosts)
    passed = by_key(hosts, keys, offered)
    bits = props.get("hw_maxphysaddr_bits")
    if bits:
        for i in np.flatnonzero(passed).tolist():
            host_bits = hosts[i].cpu_info.get("maxphysaddr", {}).get("bits")
            passed[i] = not host_bits or host_bits >= bits
    return passed


def _member_counts(hosts, members: set) -> np.ndarray:
    return np.fromiter((len(members.intersection(h.instances)) for h in hosts),
                       dtype=np.int64, count=len(hosts))


def group_anti_affinity(filter_, hosts, spec) -> np.ndarray:
    """ServerGroupAntiAffinityFilter: for an anti-affinity group, the host
    runs fewer of the group's members than the group's
    ``max_server_per_host`` (1 by default), or runs the instance itself."""
    group = spec.instance_group
    if filter_.policy_name != (group.policy if group else None):
        return _everyone(hosts)
    instance = spec.instance_uuid
    own = np.fromiter((instance in h.instances for h in hosts), dtype=bool,
                      count=len(hosts))
    rules = group.rules
    limit = rules["max_server_per_host"] if rules and "max_server_per_host" in rules else 1
    return own | (_member_counts(hosts, set(group.members)) < limit)


def group_affinity(filter_, hosts, spec) -> np.ndarray:
    """ServerGroupAffinityFilter: for an affinity group with hosts, the
    host is one of them."""
    group = spec.instance_group
    if filter_.policy_name not in (group.policies if group else []):
        return _everyone(hosts)
    group_hosts = group.hosts if group else []
    if not group_hosts:
        return _everyone(hosts)
    wanted = set(group_hosts)
    return np.fromiter((h.host in wanted for h in hosts), dtype=bool, count=len(hosts))


def _hinted_instances(spec, hint: str) -> set | None:
    """The instance uuids of a scheduler hint, None when it names none."""
    uuids = spec.get_scheduler_hint(hint)
    if not uuids:
        return None
    return {uuids} if isinstance(uuids, str) else set(uuids)


def _runs_one_of(hosts, uuids: set) -> np.ndarray:
    return np.fromiter((not uuids.isdisjoint(h.instances) for h in hosts),
                       dtype=bool, count=len(hosts))


def same_host(filter_, hosts, spec) -> np.ndarray:
    """SameHostFilter: the host runs one of the ``same_host`` instances."""
    uuids = _hinted_instances(spec, "same_host")
    return _everyone(hosts) if uuids is None else _runs_one_of(hosts, uuids)


def different_host(filter_, hosts, spec) -> np.ndarray:
    """DifferentHostFilter: the host runs none of the ``different_host``
    instances."""
    uuids = _hinted_instances(spec, "different_host")
    return _everyone(hosts) if uuids is None else ~_runs_one_of(hosts, uuids)


def _below_limit(hosts, value_of: Callable[[Any], Any],
                 limits: Sequence[Any], limit_numbers: Iterable[int]) -> np.ndarray:
    """Per host, ``value_of(host) < limits[its limit number]`` as Python
    compares them, once per distinct (value, limit number)."""
    values = list(map(value_of, hosts))
    keys = list(zip(values, limit_numbers))
    return by_key(keys, keys, lambda key: key[0] < limits[key[1]])


def _below_option(hosts, value_of: Callable[[Any], Any], limit) -> np.ndarray:
    return _below_limit(hosts, value_of, [limit], itertools.repeat(0))


def _aggregate_limit(host, key: str, default) -> Any:
    """The least of the host's aggregates' ``key`` values as an int, else
    ``default`` (none set, or one not an int)."""
    try:
        return filter_utils.validate_num_values(
            filter_utils.aggregate_values_from_key(host, key), default, cast_to=int)
    except ValueError as exc:
        LOG.warning("aggregate metadata %s is not an integer (%s): the "
                    "configured %s applies", key, exc, default)
        return default


def _below_aggregate_limit(hosts, value_of: Callable[[Any], Any], key: str,
                           default) -> np.ndarray:
    numbers, firsts = grouped(map(_aggregate_ids, hosts))
    limits = [_aggregate_limit(hosts[i], key, default) for i in firsts]
    return _below_limit(hosts, value_of, limits, numbers.tolist())


_num_instances = operator.attrgetter("num_instances")
_num_io_ops = operator.attrgetter("num_io_ops")


def num_instances(filter_, hosts, spec) -> np.ndarray:
    """NumInstancesFilter: fewer instances than ``max_instances_per_host``."""
    return _below_option(hosts, _num_instances,
                         CONF.filter_scheduler.max_instances_per_host)


def aggregate_num_instances(filter_, hosts, spec) -> np.ndarray:
    """AggregateNumInstancesFilter: fewer instances than the least
    ``max_instances_per_host`` of the host's aggregates (else the option)."""
    return _below_aggregate_limit(hosts, _num_instances, "max_instances_per_host",
                                  CONF.filter_scheduler.max_instances_per_host)


def io_ops(filter_, hosts, spec) -> np.ndarray:
    """IoOpsFilter: fewer I/O operations than ``max_io_ops_per_host``."""
    return _below_option(hosts, _num_io_ops, CONF.filter_scheduler.max_io_ops_per_host)


def aggregate_io_ops(filter_, hosts, spec) -> np.ndarray:
    """AggregateIoOpsFilter: fewer I/O operations than the least
    ``max_io_ops_per_host`` of the host's aggregates (else the option)."""
    return _below_aggregate_limit(hosts, _num_io_ops, "max_io_ops_per_host",
                                  CONF.filter_scheduler.max_io_ops_per_host)


AGGREGATE_SCOPE = "aggregate_instance_extra_specs"


def aggregate_extra_specs(filter_, hosts, spec) -> np.ndarray:
    """AggregateInstanceExtraSpecsFilter: each unscoped or
    ``aggregate_instance_extra_specs:``-scoped flavor extra spec is matched
    by one of the values its key has in the host's aggregates' metadata."""
    flavor = spec.flavor
    if "extra_specs" not in flavor or not flavor.extra_specs:
        return _everyone(hosts)
    wanted = []
    for key, requirement in flavor.extra_specs.items():
        scope, colon, rest = key.partition(":")
        if not colon:
            wanted.append((key, requirement))
        elif scope == AGGREGATE_SCOPE:
            wanted.append((rest, requirement))

    def matched(host) -> bool:
        metadata = filter_utils.aggregate_metadata_get_by_host(host)
        for key, requirement in wanted:
            values = metadata.get(key)
            if not values or not any(extra_specs_ops.match(v, requirement)
                                     for v in values):
                return False
        return True
    return by_aggregates(hosts, matched)


def aggregate_tenants(filter_, hosts, spec) -> np.ndarray:
    """AggregateMultiTenancyIsolation: the request's project is one of the
    ``filter_tenant_id*`` values of the host's aggregates, or none is set."""
    project = spec.project_id

    def admitted(host) -> bool:
        metadata = filter_utils.aggregate_metadata_get_by_host(host)
        tenants = set().union(*(values for key, values in metadata.items()
                                if key.startswith("filter_tenant_id")))
        return not tenants or project in tenants
    return by_aggregates(hosts, admitted)


def aggregate_image_isolation(filter_, hosts, spec) -> np.ndarray:
    """AggregateImagePropertiesIsolation: every metadata key of the host's
    aggregates (under ``namespace`` + ``separator`` when a namespace is
    set) that names an image property the image sets lists that value."""
    namespace = CONF.filter_scheduler.aggregate_image_properties_isolation_namespace
    prefix = namespace + CONF.filter_scheduler.aggregate_image_properties_isolation_separator \
        if namespace else ""
    if namespace:
        LOG.warning("[filter_scheduler] aggregate_image_properties_isolation_namespace "
                    "is set: nova no longer isolates on arbitrary image properties "
                    "(see [scheduler] enable_isolated_aggregate_filtering)")
    props = spec.image.properties if spec.image else {}

    def isolated(host) -> bool:
        metadata = filter_utils.aggregate_metadata_get_by_host(host)
        for key, values in metadata.items():
            if not key.startswith(prefix):
                continue
            try:
                prop = props.get(key)
            except AttributeError:      # not an image property's name
                continue
            if prop and str(prop) not in values:
                return False
        return True
    return by_aggregates(hosts, isolated)


#: nova's filters computed here, by exact class (a subclass runs as nova's)
KERNELS: dict[type, Kernel] = {
    all_hosts_filter.AllHostsFilter: all_hosts,
    compute_filter.ComputeFilter: compute_service_up,
    compute_capabilities_filter.ComputeCapabilitiesFilter: compute_capabilities,
    image_props_filter.ImagePropertiesFilter: image_properties,
    affinity_filter.ServerGroupAntiAffinityFilter: group_anti_affinity,
    affinity_filter.ServerGroupAffinityFilter: group_affinity,
    affinity_filter.SameHostFilter: same_host,
    affinity_filter.DifferentHostFilter: different_host,
    num_instances_filter.NumInstancesFilter: num_instances,
    num_instances_filter.AggregateNumInstancesFilter: aggregate_num_instances,
    io_ops_filter.IoOpsFilter: io_ops,
    io_ops_filter.AggregateIoOpsFilter: aggregate_io_ops,
    aggregate_instance_extra_specs.AggregateInstanceExtraSpecsFilter: aggregate_extra_specs,
    aggregate_multitenancy_isolation.AggregateMultiTenancyIsolation: aggregate_tenants,
    aggregate_image_properties_isolation.AggregateImagePropertiesIsolation:
        aggregate_image_isolation,
}


def kernel_mask(kernel: Kernel, filter_, hosts: Sequence[Any], spec) -> np.ndarray | None:
    """Per host, whether it passes ``filter_`` by its kernel (every host
    for a rebuild unless the filter runs on rebuilds); None when the
    kernel raised."""
    try:
        if not filter_.RUN_ON_REBUILD and scheduler_utils.request_is_rebuild(spec):
            return _everyone(hosts)
        return kernel(filter_, hosts, spec)
    except Exception as exc:
        LOG.debug("%s raised %r on arrays: nova's code runs it",
                  type(filter_).__name__, exc)
        return None


class VectorFilterHandler(nova_filters.HostFilterHandler):
    """nova's host filter handler, computing the filters ``KERNELS`` knows
    on arrays; ``get_filtered_objects`` answers as nova's."""

    def __init__(self):
        # nova's loader looks for filter classes next to the module of the
        # handler's class: it takes the state of nova's own handler
        vars(self).update(vars(nova_filters.HostFilterHandler()))

    def get_filtered_objects(self, filters, objs, spec_obj, index=0):
        """The hosts of ``objs`` that pass every filter run for instance
        ``index`` of the request, in ``objs``' order; None when a filter
        said to stop."""
        hosts = list(objs)
        LOG.debug("filtering %d host(s)", len(hosts))
        counts: list[str] = []
        for filter_ in filters:
            if not filter_.run_filter_for_index(index):
                continue
            name = type(filter_).__name__
            start = len(hosts)
            kept = self.kept(filter_, hosts, spec_obj)
            if kept is None:
                LOG.debug("filter %s ended the filtering", name)
                return None
            hosts = kept
            counts.append("%s: %d -> %d" % (name, start, len(hosts)))
            if not hosts:
                LOG.info("filter %s kept no host", name)
                break
        if not hosts:
            LOG.info("no host passed the filters for instance %s (hosts per filter: %s)",
                     spec_obj.instance_uuid, ", ".join(counts))
        return hosts

    @staticmethod
    def kept(filter_, hosts: list, spec_obj) -> list | None:
        """The hosts that pass one filter, in order: by its kernel, else
        (no kernel, no host, or the kernel raised) by nova's
        ``filter_all``, whose None is kept."""
        kernel = KERNELS.get(type(filter_))
        if kernel is not None and hosts:
            mask = kernel_mask(kernel, filter_, hosts, spec_obj)
            if mask is not None:
                return list(itertools.compress(hosts, mask.tolist()))
        passed = filter_.filter_all(hosts, spec_obj)
        return None if passed is None else list(passed)
