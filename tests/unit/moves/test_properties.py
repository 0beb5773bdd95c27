"""Property: through any sequence of boots, resizes, migrations, confirms,
reverts, failures with reschedules, deletes and reconciles, interleaved with
boots and deletes by other consumers, on random fleets with sharing
storage: usage equals the sum of allocations and never exceeds capacity;
each server is accounted on the providers it uses (max(old, new) during a
same-host resize); nothing is left once its moves end and reconcile ran."""


from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scheduler_ext import errors
from scheduler_ext.lab import fleet, invariants
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.moves.reconcile import Reconciler
from tests.unit.helpers import start, uuid_factory

FLAVORS = [
    {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10},
    {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 20},
    {"VCPU": 4, "MEMORY_MB": 4096, "DISK_GB": 40},
    {"VCPU": 2, "MEMORY_MB": 8192, "DISK_GB": 10},
]
OPS = ("boot", "resize", "migrate", "confirm", "revert", "fail", "delete",
       "reconcile", "other_boot", "other_delete")


def _no_leftovers(client, model, others):
    known = set(model.servers) | set(others)
    for prov in client.list_providers():
        for consumer in client.get_provider_allocations(prov.uuid):
            assert consumer in known, f"consumer {consumer} left on {prov.name}"


@settings(max_examples=2000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), hosts=st.integers(1, 4), sharing=st.integers(0, 2),
       strategy=st.sampled_from(["same_host", "same_host", "stock"]),
       prefer_same_host=st.booleans(),
       ops=st.lists(st.sampled_from(OPS), min_size=4, max_size=24))
def test_moves_keep_invariants(data, hosts, sharing, strategy, prefer_same_host, ops):
    client = EmbeddedPlacement()
    built = fleet.build(client, hosts=hosts, sharing=sharing, vcpus=4,
                        memory_mb=12288, disk_gb=100, shared_disk_gb=150,
                        cpu_ratio=1.0, seed=data.draw(st.integers(0, 99)))
    _, model = start(client, strategy, prefer_same_host=prefer_same_host)
    reconciler = Reconciler(client)
    make_uuid = uuid_factory(1000 + data.draw(st.integers(0, 99)))
    others: dict[str, AllocationWrite] = {}
    exact = strategy == "same_host"
    for op in ops:
        servers = sorted(model.servers)
        moving = [u for u in servers if model.servers[u].active]
        still = [u for u in servers if not model.servers[u].active]
        pick = lambda xs: data.draw(st.sampled_from(xs))  # noqa: E731
        try:
            if op == "boot":
                model.boot(pick(FLAVORS))
            elif op == "resize" and still:
                model.resize(pick(still), pick(FLAVORS),
                             allow_same_host=data.draw(st.booleans()))
            elif op == "migrate" and still:
                model.migrate(pick(still))
            elif op == "confirm" and moving:
                model.confirm(pick(moving))
            elif op == "revert" and moving:
                model.revert(pick(moving))
            elif op == "fail" and moving:
                model.fail_on_destination(pick(moving))
            elif op == "delete" and servers:
                model.delete(pick(servers))
            elif op == "other_boot":
                host = pick(list(built.hosts))
                consumer = make_uuid()
                amount = data.draw(st.integers(1, 4))
                try:
                    client.put_allocations(consumer, AllocationWrite(
                        {host: {"VCPU": amount}}, "other", "other", None))
                    others[consumer] = host
                except errors.CapacityExceeded:
                    pass
            elif op == "other_delete" and others:
                consumer = pick(sorted(others))
                client.delete_allocations(consumer)
                del others[consumer]
            elif op == "reconcile":
                assert all(f.applied for f in reconciler.run(model.states(), apply=True))
                assert invariants.check_servers(client, model.states(), exact) == []
        except errors.NoValidHost:
            event(f"{op}: no valid host")
        else:
            event(f"{op} ran")
        assert invariants.check_providers(client) == []
        assert invariants.check_servers(client, model.states(), exact=False) == []
    for u in sorted(model.servers):
        if model.servers[u].active:
            model.confirm(u)
    assert all(f.applied for f in reconciler.run(model.states(), apply=True))
    assert invariants.check_providers(client) == []
    assert invariants.check_servers(client, model.states(), exact=True) == []
    _no_leftovers(client, model, others)
