"""nova's ``get_weighed_hosts`` against ``VectorWeighing`` on the same
HostStates, in one run: median time per call of each, and their ratio.

Fleet: nova ``HostState``s with compute-node values (RAM, disk, VCPUs at
ratio 4, I/O ops, instances, build failures, hypervisor version), 100 to an
aggregate (availability-zone metadata; ``--aggregate-multipliers`` also
sets RAM and CPU multipliers on half the aggregates). Weighers: nova's
default list (``nova.scheduler.weights.all_weighers``) with nova's default
options. Each round weighs with both, alternating which goes first, and
checks that the order and the weights are equal.

    .venv/bin/python benchmarks/vector_weighing.py --hosts 1000 --rounds 200
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid

import nova.conf
from nova import objects
from nova.scheduler import host_manager
from nova.scheduler import weights as host_weights

from scheduler_ext.cmd import common
from scheduler_ext.nova.vector_weighing import VectorWeighing

CONF = nova.conf.CONF


def fleet(n: int, rng: random.Random, aggregate_multipliers: bool) -> list:
    """``n`` HostStates, 100 to an aggregate."""
    aggs = []
    for i in range((n + 99) // 100):
        metadata = {"availability_zone": "az%d" % (i % 3)}
        if aggregate_multipliers and i % 2:
            metadata.update(ram_weight_multiplier="2.0", cpu_weight_multiplier="-1")
        aggs.append(objects.Aggregate(id=i, name="agg%d" % i, metadata=metadata))
    hosts = []
    for i in range(n):
        state = host_manager.HostState("compute%d" % i, "node%d" % i, "cell1")
        state.uuid = str(uuid.UUID(int=i + 1))
        state.free_ram_mb = rng.randrange(0, 512 * 1024, 1024)
        state.free_disk_mb = rng.randrange(0, 4 * 1024 * 1024, 10240)
        state.vcpus_total = rng.choice([32, 64, 128])
        state.cpu_allocation_ratio = 4.0
        state.vcpus_used = rng.randrange(0, state.vcpus_total * 4)
        state.num_io_ops = rng.randrange(0, 8)
        state.num_instances = rng.randrange(0, 120)
        state.failed_builds = rng.choice([0] * 20 + [1, 2])
        state.hypervisor_version = rng.choice([6002000, 8000000, 9001000])
        state.aggregates = [aggs[i // 100]]
        hosts.append(state)
    return hosts


def timed(call) -> tuple[float, list]:
    """(seconds ``call`` took, what it returned)."""
    start = time.perf_counter()
    out = call()
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=common.count(1), default=1000)
    parser.add_argument("--rounds", type=common.count(1), default=200)
    parser.add_argument("--aggregate-multipliers", action="store_true")
    parser.add_argument("--seed", type=common.count(0), default=1)
    args = parser.parse_args(argv)
    CONF([], project="nova")
    objects.register_all()
    hosts = fleet(args.hosts, random.Random(args.seed), args.aggregate_multipliers)
    spec = objects.RequestSpec(instance_group=None, requested_destination=None)
    handler = host_weights.HostWeightHandler()
    weighers = [cls() for cls in handler.get_matching_classes(
        CONF.filter_scheduler.weight_classes)]
    vector = VectorWeighing(weighers)
    calls = {"nova": lambda: handler.get_weighed_objects(weighers, hosts, spec),
             "vector": lambda: vector.weighed_hosts(hosts, spec)}
    times: dict[str, list[float]] = {"nova": [], "vector": []}
    for r in range(args.rounds):
        out = {}
        for name in (("nova", "vector") if r % 2 else ("vector", "nova")):
            seconds, out[name] = timed(calls[name])
            times[name].append(seconds)
        if [(w.obj.uuid, w.weight) for w in out["nova"]] != \
                [(w.obj.uuid, w.weight) for w in out["vector"]]:
            print("round %d: the weighings differ" % r, file=sys.stderr)
            return 1
    nova_ms = statistics.median(times["nova"]) * 1e3
    vector_ms = statistics.median(times["vector"]) * 1e3
    print("%d hosts, %d weighers, %d rounds (equal every round): nova %.3f ms, "
          "vector %.3f ms, ratio %.1fx" % (args.hosts, len(weighers), args.rounds,
                                            nova_ms, vector_ms, nova_ms / vector_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
