"""The DISK_GB data migration: consumers holding DISK_GB on a compute node
in a sharing aggregate end up holding it exactly once, on the sharing
provider; one atomic write each; dry run reads only; idempotent; safe to
interrupt; a refusal leaves that consumer as it was."""

import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.storage import diskmigration, sync, topology
from tests.unit.storage.reports import shared
from tests.unit.storage.test_sync import Counting

CPU = {"VCPU": Inventory(16), "MEMORY_MB": Inventory(65536)}


def build(disk_gib=1000):
    """cn1, cn2 with their own DISK_GB (as nova 34 reports it) in the
    aggregate of one GPFS sharing provider; cn3 alone, with local disk."""
    client = EmbeddedPlacement()
    nodes = {}
    for name in ("cn1", "cn2", "cn3"):
        prov = client.create_provider(name)
        client.set_inventories(prov.uuid, prov.generation,
                               {**CPU, "DISK_GB": Inventory(200)})
        nodes[name] = prov.uuid
    reports = [shared("cn1", seen=["cn1"], total_gib=disk_gib),
               shared("cn2", seen=["cn1", "cn2"], total_gib=disk_gib)]
    topo = topology.build(reports)
    sync.apply(client, sync.plan(client, topo))
    return client, nodes, topo.providers[0].uuid


def boot(client, node, disk, extra=None):
    consumer = str(uuid.uuid4())
    allocs = {node: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": disk}}
    allocs.update(extra or {})
    client.put_allocations(consumer, AllocationWrite(allocs, "proj", "user", None))
    return consumer


def disk_of(client, consumer):
    return {rp: rcs["DISK_GB"] for rp, rcs in
            client.get_consumer(consumer).allocations.items() if "DISK_GB" in rcs}


def test_every_consumer_ends_with_its_disk_once_on_the_sharing_provider():
    client, nodes, ss = build()
    a = boot(client, nodes["cn1"], 20)
    b = boot(client, nodes["cn2"], 40)
    both = boot(client, nodes["cn1"], 30, {ss: {"DISK_GB": 30}})   # counted twice
    local = boot(client, nodes["cn3"], 10)
    counting = Counting(client)
    the_plan = diskmigration.plan(counting)
    assert counting.writes == []                      # the dry run reads only
    assert sorted((m.consumer, m.node.name, m.amount) for m in the_plan.moves) == \
        sorted([(a, "cn1", 20), (b, "cn2", 40), (both, "cn1", 30)])
    assert [n.name for n in the_plan.to_close] == ["cn1", "cn2"]
    result = diskmigration.apply(counting, the_plan)
    assert counting.writes == ["put_allocations"] * 3 + ["set_inventories"] * 2
    assert result.failed == {}
    assert disk_of(client, a) == {ss: 20} and disk_of(client, b) == {ss: 40}
    assert disk_of(client, both) == {ss: 30}
    assert disk_of(client, local) == {nodes["cn3"]: 10}
    assert client.get_consumer(a).allocations[nodes["cn1"]] == \
        {"VCPU": 1, "MEMORY_MB": 512}
    assert client.get_usages(ss)["DISK_GB"] == 90
    for name in ("cn1", "cn2"):
        inv = client.get_inventories(nodes[name])[1]["DISK_GB"]
        assert inv.capacity < 1 and inv.total == 200       # reported, offers nothing
    assert client.get_inventories(nodes["cn3"])[1]["DISK_GB"].capacity == 200
    # idempotent: a second run plans and writes nothing
    counting.writes.clear()
    again = diskmigration.plan(counting)
    assert again.moves == [] and again.to_close == []
    diskmigration.apply(counting, again)
    assert counting.writes == []


def test_an_interrupted_run_is_finished_by_the_next():
    client, nodes, ss = build()
    consumers = [boot(client, nodes["cn1"], 10) for _ in range(4)]
    the_plan = diskmigration.plan(client)

    class Interrupted(Exception):
        pass

    class StopAfterTwo:
        def __init__(self, inner):
            self.inner, self.puts = inner, 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def put_allocations(self, consumer, write):
            if self.puts == 2:
                raise Interrupted()
            self.puts += 1
            return self.inner.put_allocations(consumer, write)

    with pytest.raises(Interrupted):
        diskmigration.apply(StopAfterTwo(client), the_plan)
    assert sum(1 for c in consumers if disk_of(client, c) == {ss: 10}) == 2
    rest = diskmigration.plan(client)
    assert len(rest.moves) == 2
    diskmigration.apply(client, rest)
    assert all(disk_of(client, c) == {ss: 10} for c in consumers)


def test_a_consumer_changed_since_the_plan_is_re_read():
    client, nodes, ss = build()
    c = boot(client, nodes["cn1"], 10)
    the_plan = diskmigration.plan(client)
    current = client.get_consumer(c)               # someone resizes it
    client.put_allocations(c, current.write(
        {nodes["cn1"]: {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 15}}))
    diskmigration.apply(client, the_plan)
    assert client.get_consumer(c).allocations == {
        nodes["cn1"]: {"VCPU": 2, "MEMORY_MB": 1024}, ss: {"DISK_GB": 15}}


def test_a_full_sharing_provider_leaves_that_consumer_as_it_was():
    client, nodes, ss = build(disk_gib=50)
    big = boot(client, nodes["cn1"], 60)
    small = boot(client, nodes["cn2"], 20)
    before = client.get_consumer(big).allocations
    result = diskmigration.apply(client, diskmigration.plan(client))
    assert client.get_consumer(big).allocations == before
    assert disk_of(client, small) == {ss: 20}
    assert list(result.failed) == [big]
    assert "placement refused" in result.failed[big]


def test_a_compute_node_between_two_sharing_providers_is_left_alone():
    client, nodes, ss = build()
    other = topology.build([shared("cn1", "nfs:filer:/export", seen=["cn1"],
                                   token="44444444-4444-4444-8444-444444444444")])
    sync.apply(client, sync.plan(client, other))
    c = boot(client, nodes["cn1"], 10)
    the_plan = diskmigration.plan(client)
    assert [m.node.name for m in the_plan.moves] == []
    assert any("compute node cn1: in the aggregates of 2 DISK_GB sharing "
               "providers" in s for s in the_plan.skipped)
    diskmigration.apply(client, the_plan)
    assert disk_of(client, c) == {nodes["cn1"]: 10}


def test_placement_down_stops_the_run():
    client, nodes, _ = build()
    boot(client, nodes["cn1"], 10)
    the_plan = diskmigration.plan(client)

    class Down:
        def __getattr__(self, name):
            return getattr(client, name)

        def put_allocations(self, consumer, write):
            raise errors.PlacementUnavailable("placement is down")

    with pytest.raises(errors.PlacementUnavailable):
        diskmigration.apply(Down(), the_plan)
