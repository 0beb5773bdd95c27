"""nova's ``HostFilterHandler.get_filtered_objects`` against
``VectorFilterHandler`` on the same HostStates and filter objects, in one
run: median time per call of each, and their ratio.

Fleet: nova ``HostState``s as nova's host manager builds them (per round,
a ``nova-compute`` service per host heard from in the last 50 s, one in 50
disabled and one in 50 silent for an hour; QEMU/KVM on x86_64 at one of
three hypervisor versions, CPU info as JSON text, stats, instance and I/O
counts), 100 to an aggregate. Request: a flavor with capability extra specs
(``--extra-specs 0`` for none), an x86_64 KVM HVM image, an anti-affinity
group with three members. Filters: nova's default
``[filter_scheduler] enabled_filters`` (``--filters`` names others). Each
round filters with both, alternating which goes first, and checks that the
hosts kept and their order are equal.

    .venv/bin/python benchmarks/vector_filtering.py --hosts 1000 --rounds 200

``--per-filter`` also times each filter alone on the whole fleet.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import random
import statistics
import sys
import uuid

import nova.conf
from nova import objects
from nova.scheduler import filters as nova_filters
from nova.scheduler import host_manager
from oslo_serialization import jsonutils
from oslo_utils import timeutils

from scheduler_ext.cmd import common
from scheduler_ext.nova.vector_filtering import KERNELS, VectorFilterHandler
from vector_weighing import timed   # benchmarks/ is the script's directory

CONF = nova.conf.CONF

CPU_INFO = jsonutils.dumps({"vendor": "Intel", "arch": "x86_64", "model": "Skylake",
                            "features": ["sse", "avx", "avx2"],
                            "topology": {"cores": 16, "threads": 2, "sockets": 2}})
EXTRA_SPECS = {"capabilities:cpu_info:vendor": "Intel",
               "capabilities:hypervisor_type": "s== QEMU",
               "capabilities:cpu_info:topology:cores": ">= 8"}
MEMBERS = [str(uuid.UUID(int=k)) for k in range(1, 4)]


def fleet(n: int, rng: random.Random) -> list:
    """``n`` HostStates, 100 to an aggregate (services: ``heartbeats``)."""
    aggs = [objects.Aggregate(id=i, name="agg%d" % i,
                              metadata={"availability_zone": "az%d" % (i % 3)})
            for i in range((n + 99) // 100)]
    hosts = []
    for i in range(n):
        state = host_manager.HostState("compute%d" % i, "node%d" % i, "cell1")
        state.uuid = str(uuid.UUID(int=i + 1))
        state.hypervisor_type = "QEMU"
        state.hypervisor_version = rng.choice([6002000, 8000000, 9001000])
        state.supported_instances = [["x86_64", "kvm", "hvm"], ["i686", "kvm", "hvm"]]
        state.cpu_info = CPU_INFO
        state.num_instances = rng.randrange(0, 120)
        state.num_io_ops = rng.randrange(0, 8)
        state.stats = {"num_instances": str(state.num_instances),
                       "io_workload": str(state.num_io_ops)}
        state.aggregates = [aggs[i // 100]]
        state.instances = {m: None for m in MEMBERS if rng.random() < 0.01}
        hosts.append(state)
    return hosts


def heartbeats(hosts: list, rng: random.Random) -> None:
    """Each host's ``nova-compute`` service as nova's host manager reads it
    for a request: last heard from 0 to 50 s ago (one in 50 an hour ago),
    one in 50 disabled."""
    now = timeutils.utcnow()
    for state in hosts:
        silent = 3600 if rng.random() < 0.02 else rng.randrange(0, 50)
        state.service = host_manager.ReadOnlyDict({
            "host": state.host, "binary": "nova-compute",
            "disabled": rng.random() < 0.02, "disabled_reason": None,
            "forced_down": False, "last_seen_up": now - datetime.timedelta(seconds=silent),
            "created_at": now - datetime.timedelta(days=30)})


def request(extra_specs: int):
    """A request spec: the flavor's first ``extra_specs`` capability specs,
    an x86_64 KVM image, an anti-affinity group."""
    return objects.RequestSpec(
        instance_uuid=str(uuid.uuid4()), project_id="p1",
        flavor=objects.Flavor(name="m1.small",
                              extra_specs=dict(list(EXTRA_SPECS.items())[:extra_specs])),
        image=objects.ImageMeta(properties=objects.ImageMetaProps(
            hw_architecture="x86_64", img_hv_type="kvm", hw_vm_mode="hvm")),
        instance_group=objects.InstanceGroup(
            policy="anti-affinity", policies=["anti-affinity"], members=MEMBERS, hosts=[]),
        scheduler_hints={}, pci_requests=None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=common.count(1), default=1000)
    parser.add_argument("--rounds", type=common.count(1), default=200)
    parser.add_argument("--extra-specs", type=common.count(0, len(EXTRA_SPECS)),
                        default=len(EXTRA_SPECS))
    parser.add_argument("--filters", help="comma-separated filter class names "
                        "(default: nova's enabled_filters)")
    parser.add_argument("--per-filter", action="store_true",
                        help="also time each filter alone on the whole fleet")
    parser.add_argument("--seed", type=common.count(0), default=1)
    args = parser.parse_args(argv)
    CONF([], project="nova")
    objects.register_all()
    # nova's filters warn per silent host: the log's cost is not the filters'
    logging.getLogger("nova").setLevel(logging.ERROR)
    hosts = fleet(args.hosts, random.Random(args.seed))
    spec = request(args.extra_specs)
    nova_handler = nova_filters.HostFilterHandler()
    classes = {cls.__name__: cls for cls in nova_handler.get_matching_classes(
        CONF.filter_scheduler.available_filters)}
    names = args.filters.split(",") if args.filters else CONF.filter_scheduler.enabled_filters
    unknown = [name for name in names if name not in classes]
    if unknown:
        parser.error(f"--filters: not one of nova's filters: {', '.join(unknown)}")
    filters = [classes[name]() for name in names]
    rng = random.Random(args.seed)
    for label, run in [("", filters)] + ([("  %s alone: " % type(f).__name__, [f])
                                         for f in filters] if args.per_filter else []):
        figures = compare(nova_handler, run, hosts, spec, args.rounds, rng)
        if figures is None:
            return 1
        nova_ms, vector_ms, kept = figures
        on_arrays = sum(type(f) in KERNELS for f in run)
        print("%s%d hosts (%d kept), %d filters (%d on arrays), %d extra specs, "
              "%d rounds (equal every round): nova %.3f ms, vector %.3f ms, ratio %.1fx"
              % (label, args.hosts, kept, len(run), on_arrays, args.extra_specs,
                 args.rounds, nova_ms, vector_ms, nova_ms / vector_ms))
    return 0


def compare(nova_handler, filters: list, hosts: list, spec, rounds: int,
            rng: random.Random) -> tuple[float, float, int] | None:
    """(nova's median ms, ours, hosts kept) over ``rounds`` rounds; None
    (after saying so) when a round's results differ."""
    vector = VectorFilterHandler()
    calls = {"nova": lambda: nova_handler.get_filtered_objects(filters, hosts, spec),
             "vector": lambda: vector.get_filtered_objects(filters, hosts, spec)}
    times: dict[str, list[float]] = {"nova": [], "vector": []}
    kept = 0
    for r in range(rounds):
        heartbeats(hosts, rng)
        out = {}
        for name in (("nova", "vector") if r % 2 else ("vector", "nova")):
            seconds, out[name] = timed(calls[name])
            times[name].append(seconds)
        if list(map(id, out["nova"])) != list(map(id, out["vector"])):
            print("round %d: the filterings differ" % r, file=sys.stderr)
            return None
        kept = len(out["nova"])
    return (statistics.median(times["nova"]) * 1e3,
            statistics.median(times["vector"]) * 1e3, kept)


if __name__ == "__main__":
    sys.exit(main())
