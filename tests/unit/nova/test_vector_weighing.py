"""``VectorWeighing`` against nova's own weighing (nova's installed
``HostWeightHandler.get_weighed_objects``, which ``get_weighed_hosts``
calls) on generated fleets of nova ``HostState``s: same hosts in the same
order, every weight within 1e-9 (NaN where nova's is NaN).

Each case draws the fleet (1 to a few hundred hosts, a few up to 2,000;
values from small pools so that ties are common), its aggregates with
per-aggregate multipliers (valid, negative, zero, unparsable), nova's
``[filter_scheduler]``/``[metrics]`` options through nova's CONF fixture,
the request (server group, cross-cell destination) and the weighers:
nova's default list, or a shuffled subset with weighers computed by nova's
code (a subclass of one of ours, an operator's weigher with bounds).

``VECTOR_WEIGHING_CASES`` (default 2,000) sets the number of cases of the
sweep; ``VECTOR_WEIGHING_SEED`` its first seed.
"""

import os
import random
import uuid

import nova.conf
import numpy as np
import pytest
from nova import exception as nova_exception
from nova import objects
from nova.pci import stats as pci_stats
from nova.scheduler import host_manager
from nova.scheduler import weights as host_weights
from nova.scheduler.weights import compute, hypervisor_version, ram

from scheduler_ext.nova.ranking import NovaRanking
from scheduler_ext.nova.vector_weighing import KERNELS, VectorWeighing
from tests.unit.nova.generators import fleet_size, pool, quiet

CONF = nova.conf.CONF
objects.register_all()

CASES = int(os.environ.get("VECTOR_WEIGHING_CASES", "2000"))
FIRST_SEED = int(os.environ.get("VECTOR_WEIGHING_SEED", "0"))
TOLERANCE = 1e-9

MULTIPLIERS = ["ram_weight_multiplier", "cpu_weight_multiplier",
               "disk_weight_multiplier", "io_ops_weight_multiplier",
               "num_instances_weight_multiplier", "build_failure_weight_multiplier",
               "hypervisor_version_weight_multiplier",
               "soft_affinity_weight_multiplier",
               "soft_anti_affinity_weight_multiplier",
               "cross_cell_move_weight_multiplier", "pci_weight_multiplier"]
METADATA_KEYS = MULTIPLIERS + ["metrics_weight_multiplier"]
MULTIPLIER_VALUES = [-1000.0, -2.5, -1.0, -0.5, 0.0, 0.0, 0.5, 1.0, 1.0, 2.0, 1e6]
#: nova's options that take no negative value (an aggregate's may be)
NOT_NEGATIVE = {"pci_weight_multiplier", "soft_affinity_weight_multiplier",
                "soft_anti_affinity_weight_multiplier"}
METADATA_VALUES = ["2", "-1.5", "0", "0.25", " 3 ", "1e3", "-7", "abc", "", "1,2",
                   "inf", "nan"]
METRIC_NAMES = ["cpu.frequency", "cpu.percent", "cpu.user.time"]


class PlainRAMWeigher(ram.RAMWeigher):
    """A subclass of a weigher we compute: it runs as nova's code."""


class HostNumberWeigher(host_weights.BaseHostWeigher):
    """An operator's weigher with bounds: the host's number modulo 7,
    held within [1, 5]."""

    minval = 1
    maxval = 5

    def _weigh_object(self, host_state, weight_properties):
        return int(host_state.host[1:]) % 7

    def weight_multiplier(self, host_state):
        return -0.5


@pytest.fixture
def quiet_multiplier_warnings():
    """Unparsable aggregate multipliers are drawn on purpose: their
    warnings (nova's and ours) are left out of the log."""
    with quiet("nova.scheduler.utils", "scheduler_ext.nova.vector_weighing"):
        yield


def _aggregates(rng: random.Random) -> list:
    aggs = []
    for i in range(rng.randint(0, 5)):
        keys = rng.sample(METADATA_KEYS, rng.randint(0, 4))
        metadata = {k: rng.choice(METADATA_VALUES) for k in keys}
        metadata["availability_zone"] = "az%d" % i
        aggs.append(objects.Aggregate(id=i, name="agg%d" % i, metadata=metadata))
    return aggs


def _pci(rng: random.Random):
    if rng.random() < 0.3:
        return None
    stats = pci_stats.PciDeviceStats(None)
    stats.pools = [{"count": rng.choice([0, 1, 2, 8, 64, 150])}
                   for _ in range(rng.randint(0, 3))]
    return stats


def _fields(rng: random.Random) -> dict[str, list]:
    """Per HostState attribute, the pool its values are drawn from."""
    return {
        "free_ram_mb": pool(rng, list(range(-4096, 524288, 512)), [0, 2048, 65536]),
        "free_disk_mb": pool(rng, list(range(-10240, 4096000, 10240)), [0, 102400]),
        "vcpus_total": pool(rng, list(range(0, 257)), [16, 64]),
        "vcpus_used": pool(rng, list(range(0, 300)), [0, 8, 70]),
        "cpu_allocation_ratio": pool(rng, [0.0, 0.5, 1.0, 1.5, 4.0, 16.0], [1.0, 4.0]),
        "num_io_ops": pool(rng, list(range(0, 20)), [0, 1]),
        "num_instances": pool(rng, list(range(0, 200)), [0, 5]),
        "failed_builds": pool(rng, list(range(0, 12)), [0, 0, 0, 3]),
        "hypervisor_version": pool(rng, [None, 0, 1002003, 6002000, 8000000, 9001000],
                                    [None, 6002000]),
    }


def _metrics(rng: random.Random):
    if rng.random() < 0.2:
        return None
    return objects.MonitorMetricList(objects=[
        objects.MonitorMetric(name=name, value=rng.choice([0, 1, 250, 3000, 12.5]),
                              source="test")
        for name in rng.sample(METRIC_NAMES, rng.randint(0, 3))])


def _hosts(rng: random.Random, n: int, members: list[str], cells: list[str]) -> list:
    aggs = _aggregates(rng)
    pcis = [_pci(rng) for _ in range(4)]
    metric_lists = [_metrics(rng) for _ in range(6)]
    fields = _fields(rng)
    hosts = []
    for i in range(n):
        state = host_manager.HostState("h%d" % i, "n%d" % i, rng.choice(cells))
        state.uuid = str(uuid.UUID(int=i + 1))
        for name, pool in fields.items():
            setattr(state, name, rng.choice(pool))
        state.aggregates = rng.sample(aggs, rng.randint(0, len(aggs))) \
            if rng.random() < 0.7 else []
        state.pci_stats = rng.choice(pcis)
        state.metrics = rng.choice(metric_lists)
        state.instances = {m: None for m in members if rng.random() < 0.2}
        hosts.append(state)
    return hosts


def _spec(rng: random.Random, members: list[str], cells: list[str]):
    spec = objects.RequestSpec()
    roll = rng.random()
    if roll < 0.6:
        spec.instance_group = objects.InstanceGroup(
            policy=rng.choice(["soft-affinity", "soft-anti-affinity", "affinity"]),
            members=members)
    elif roll < 0.97:
        spec.instance_group = None      # else unset: nova fails, and so must we
    roll = rng.random()
    if roll < 0.5:
        spec.requested_destination = objects.Destination(
            cell=objects.CellMapping(uuid=rng.choice(cells)) if rng.random() < 0.9
            else None, allow_cross_cell_move=rng.random() < 0.7)
    elif roll < 0.7:
        spec.requested_destination = None
    return spec


def _configure(rng: random.Random, conf) -> None:
    values = {name: rng.choice(MULTIPLIER_VALUES) for name in MULTIPLIERS
              if rng.random() < 0.6}
    conf.config(group="filter_scheduler", **{
        name: abs(value) if name in NOT_NEGATIVE else value
        for name, value in values.items()})
    setting = ",".join("%s=%s" % (name, rng.choice([-1.0, 0.0, 0.5, 2.0]))
                       for name in rng.sample(METRIC_NAMES, rng.randint(0, 3)))
    conf.config(group="metrics", weight_setting=setting.split(",") if setting else [],
                weight_multiplier=rng.choice(MULTIPLIER_VALUES),
                weight_of_unavailable=rng.choice([-10000.0, 0.0, 5.0]))


def _weighers(rng: random.Random) -> list:
    """nova's configured weighers (as its HostManager builds them), or a
    shuffled subset with weighers nova's code runs."""
    handler = host_weights.HostWeightHandler()
    weighers = [cls() for cls in handler.get_matching_classes(
        CONF.filter_scheduler.weight_classes)]
    if rng.random() < 0.4:
        return weighers
    weighers = rng.sample(weighers, rng.randint(1, len(weighers)))
    if rng.random() < 0.3:
        bounded = hypervisor_version.HypervisorVersionWeigher()
        bounded.maxval = 6002000        # nova's clamp read off the instance
        weighers.append(bounded)
    weighers.extend(cls() for cls in (PlainRAMWeigher, HostNumberWeigher)
                    if rng.random() < 0.3)
    rng.shuffle(weighers)
    return weighers


def _same(ours: list, novas: list) -> str | None:
    """Why ``ours`` is not nova's weighing, or None."""
    if [id(w.obj) for w in ours] != [id(w.obj) for w in novas]:
        return "order"
    for mine, theirs in zip(ours, novas):
        a, b = mine.weight, theirs.weight
        if not (a == b or (np.isnan(a) and np.isnan(b)) or abs(a - b) <= TOLERANCE):
            return "weight of %s: %r != %r" % (mine.obj.host, a, b)
    return None


def run_case(seed: int, conf) -> tuple[int, bool]:
    """One generated case; (hosts, whether every weight was bit-equal).
    Fails the test when ours is not nova's."""
    rng = random.Random(seed)
    conf.config(group="metrics", required=rng.random() < 0.05)
    _configure(rng, conf)
    cells = [str(uuid.UUID(int=(seed << 8) + c)) for c in range(rng.randint(1, 3))]
    members = [str(uuid.uuid4()) for _ in range(rng.randint(0, 6))]
    hosts = _hosts(rng, fleet_size(rng), members, cells)
    spec = _spec(rng, members, cells)
    weighers = _weighers(rng)
    handler = host_weights.HostWeightHandler()
    try:
        novas = handler.get_weighed_objects(weighers, hosts, spec)
    except (nova_exception.ComputeHostMetricNotFound,
            nova_exception.ObjectActionError) as e:    # a metric, a spec's field
        with pytest.raises(type(e)):
            VectorWeighing(weighers).weighed_hosts(hosts, spec)
        return len(hosts), True
    ours = VectorWeighing(weighers).weighed_hosts(hosts, spec)
    why = _same(ours, novas)
    assert why is None, "seed %d: %s" % (seed, why)
    return len(hosts), all(a.weight == b.weight or np.isnan(a.weight)
                           for a, b in zip(ours, novas))


def test_vector_weighing_is_novas_weighing(nova_conf, quiet_multiplier_warnings):
    hosts = exact = 0
    for seed in range(FIRST_SEED, FIRST_SEED + CASES):
        n, bit_equal = run_case(seed, nova_conf)
        hosts += n
        exact += bit_equal
        nova_conf.reset()
    print("vector weighing: %d cases, %d hosts, %d bit-equal" % (CASES, hosts, exact))
    assert exact == CASES


def test_every_weigher_of_novas_is_computed_here():
    """(the image properties weigher while nova's option disables it)"""
    weighers = [cls() for cls in host_weights.all_weighers()]
    assert len(weighers) == 13
    assert [type(w).__name__ for w in weighers if type(w) not in KERNELS] == []
    # a subclass of a weigher we compute is not ours to compute
    assert PlainRAMWeigher not in KERNELS


def test_an_aggregate_multiplier_of_zero_removes_a_weigher(nova_conf):
    """Two hosts; RAM prefers h0, build failures prefer h1; h0's aggregate
    sets the build failure multiplier to 0 (nova reads it per host)."""
    hosts = [host_manager.HostState("h%d" % i, "n", None) for i in range(2)]
    hosts[0].free_ram_mb, hosts[1].free_ram_mb = 2048, 1024
    hosts[0].failed_builds = 3
    nova_conf.config(group="filter_scheduler", build_failure_weight_multiplier=10.0)
    weighers = [ram.RAMWeigher(), compute.BuildFailureWeigher()]
    weighing = VectorWeighing(weighers)
    assert [w.obj.host for w in weighing.weighed_hosts(hosts, None)] == ["h1", "h0"]
    hosts[0].aggregates = [objects.Aggregate(
        id=1, metadata={"build_failure_weight_multiplier": "0"})]
    assert [(w.obj.host, w.weight) for w in weighing.weighed_hosts(hosts, None)] == \
        [("h0", 1.0), ("h1", 0.5)]


class RecordingWeigher(host_weights.BaseHostWeigher):
    """A weigher we do not compute: prefers the later hosts, records the
    hosts and the weights so far it was handed."""

    def __init__(self):
        self.seen: list = []

    def weigh_objects(self, weighed_obj_list, weight_properties):
        self.seen.append([(w.obj.host, w.weight) for w in weighed_obj_list])
        return [int(w.obj.host[1:]) for w in weighed_obj_list]

    def _weigh_object(self, obj, weight_properties):
        raise AssertionError("weigh_objects is overridden")


class HostManager:
    """The part of nova's HostManager NovaRanking calls: every host passes."""

    def __init__(self, weighers: list):
        self.weighers = weighers
        self.enabled_filters: list = []

    def get_filtered_hosts(self, hosts, spec, index):
        return list(hosts)

    def get_weighed_hosts(self, hosts, spec):
        raise AssertionError("NovaRanking weighs with VectorWeighing")


def test_nova_ranking_weighs_with_vector_weighing_in_novas_order(nova_conf):
    """NovaRanking orders by the vectorised weighers and runs the weigher we
    do not compute as nova's code, after the RAM weigher (the order of
    nova's list): it is handed the RAM weights."""
    nova_conf.config(group="filter_scheduler", host_subset_size=1,
                     shuffle_best_same_weighed_hosts=False)
    hosts = [host_manager.HostState("h%d" % i, "n", None) for i in range(3)]
    for state, ram_mb in zip(hosts, [4096, 0, 2048]):
        state.free_ram_mb = ram_mb
    recording = RecordingWeigher()
    ranking = NovaRanking(None, None, HostManager([ram.RAMWeigher(), recording]), None)
    order = ranking._nova_order(hosts)
    # RAM: 1, 0, 0.5; recording: 0, 0.5, 1 -> h2 (1.5), h0 (1), h1 (0.5)
    assert [h.host for h in order] == ["h2", "h0", "h1"]
    assert recording.seen == [[("h0", 1.0), ("h1", 0.0), ("h2", 0.5)]]
