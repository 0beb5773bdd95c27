"""CapacityIndex.replace_usages: the bulk usage refresh (placement's usage
aggregate) leaves the index as a fresh build would."""

import uuid

from scheduler_ext.lab import fleet
from scheduler_ext.engine import CapacityIndex
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.embedded import EmbeddedPlacement


def _rows(client):
    return [(p.uuid, rc, n) for p in client.list_providers()
            for rc, n in client.get_usages(p.uuid).items() if n]


def test_replace_usages_matches_a_rebuild():
    client = EmbeddedPlacement()
    built = fleet.build(client, hosts=8, sharing=2, seed=3)
    consumers = [str(uuid.UUID(int=i + 1)) for i in range(6)]
    for i, c in enumerate(consumers):
        client.put_allocations(c, AllocationWrite(
            {built.hosts[i]: {"VCPU": 4 + i, "MEMORY_MB": 1024}}, "p", "u", None))
    index = CapacityIndex.from_snapshot(client.snapshot())
    # allocations leave without any generation changing, others arrive
    for c in consumers[:3]:
        client.delete_allocations(c)
    client.put_allocations(str(uuid.UUID(int=99)), AllocationWrite(
        {built.hosts[7]: {"VCPU": 60}, built.sharing[0]: {"DISK_GB": 500}},
        "p", "u", None))
    index.replace_usages(_rows(client))
    fresh = CapacityIndex.from_snapshot(client.snapshot())
    for p in client.list_providers():
        assert index.usage(p.uuid) == fresh.usage(p.uuid) == {
            rc: n for rc, n in client.get_usages(p.uuid).items()}
    for amount in (1, 8, 40, 60):
        req = CandidateRequest({"VCPU": amount, "DISK_GB": 10})
        assert index.candidates(req) == fresh.candidates(req)


def test_unknown_providers_and_classes_are_ignored():
    client = EmbeddedPlacement()
    built = fleet.build(client, hosts=2, sharing=0, seed=1)
    index = CapacityIndex.from_snapshot(client.snapshot())
    index.replace_usages([(str(uuid.UUID(int=5)), "VCPU", 3),
                          (built.hosts[0], "CUSTOM_X", 2),
                          (built.hosts[0], "VCPU", 2)])
    assert index.usage(built.hosts[0])["VCPU"] == 2
    assert index.usage(built.hosts[1])["VCPU"] == 0


def test_set_usages_of_some_providers_matches_a_rebuild():
    client = EmbeddedPlacement()
    built = fleet.build(client, hosts=8, sharing=2, seed=3)
    index = CapacityIndex.from_snapshot(client.snapshot())
    client.put_allocations(str(uuid.UUID(int=7)), AllocationWrite(
        {built.hosts[1]: {"VCPU": 3, "MEMORY_MB": 512},
         built.sharing[1]: {"DISK_GB": 40}}, "p", "u", None))
    written = [built.hosts[1], built.sharing[1]]
    usage = {u: {rc: n for rc, n in client.get_usages(u).items() if n} for u in written}
    usage[built.hosts[1]]["NO_SUCH_CLASS"] = 5      # no inventory: skipped
    index.set_usages(dict(usage, unknown={"VCPU": 1}))
    fresh = CapacityIndex.from_snapshot(client.snapshot())
    for p in client.list_providers():
        assert index.usage(p.uuid) == fresh.usage(p.uuid)
    req = CandidateRequest({"VCPU": 1, "DISK_GB": 10})
    assert index.candidates(req) == fresh.candidates(req)
