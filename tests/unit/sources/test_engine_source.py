"""The engine's view of placement: re-read before each request unless
refresh_interval says it is fresh enough."""

import uuid

import pytest

from scheduler_ext import driver as se_driver
from scheduler_ext import errors
from scheduler_ext.lab.fleet import SHARING_TRAIT, add_host
from scheduler_ext.placement import AllocationWrite, Inventory, allocations
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.sources.engine import EngineCandidateSource
from scheduler_ext.moves.request import ScheduleRequest
from scheduler_ext.placement.query import CandidateRequest
from tests.unit.helpers import small_host, start

FULL = {"VCPU": 2, "MEMORY_MB": 8192, "DISK_GB": 1028}


def _boot_full(drv, n):
    return drv.select_destinations(ScheduleRequest(
        (str(uuid.UUID(int=n)),), CandidateRequest(FULL), "p", "u"))


@pytest.mark.parametrize("interval, sees_free_host", [(0.0, True), (3600.0, False)])
def test_refresh_interval(interval, sees_free_host):
    client = EmbeddedPlacement()
    host = small_host(client)
    other = str(uuid.UUID(int=50))
    client.put_allocations(other, AllocationWrite({host: FULL}, "x", "x", None))
    drv, _ = start(client, refresh_interval=interval)
    client.delete_allocations(other)   # no provider generation moves
    if sees_free_host:
        assert _boot_full(drv, 1)[0][0].root == host
    else:
        with pytest.raises(errors.NoValidHost):
            _boot_full(drv, 1)
        assert client.get_consumer(str(uuid.UUID(int=1))).allocations == {}


def _four_hosts():
    client = EmbeddedPlacement()
    hosts = [small_host(client, f"host{i}") for i in range(4)]
    return client, hosts


def test_max_alternates_per_call():
    client, hosts = _four_hosts()
    drv, _ = start(client)
    req = ScheduleRequest((str(uuid.UUID(int=1)),), CandidateRequest({"VCPU": 1}), "p", "u")
    assert len(drv.select_destinations(req)[0]) == 3          # claimed + 2
    req = ScheduleRequest((str(uuid.UUID(int=2)),), CandidateRequest({"VCPU": 1}), "p", "u")
    assert len(drv.select_destinations(req, max_alternates=0)[0]) == 1
    req = ScheduleRequest((str(uuid.UUID(int=3)),), CandidateRequest({"VCPU": 1}), "p", "u")
    assert len(drv.select_destinations(req, max_alternates=5)[0]) == 4


class Without:
    """A ranking that drops one host (like a host filter)."""

    limit = 100

    orders_all = False

    def __init__(self, host):
        self.host = host
        self.calls = 0

    def rank(self, cands):
        self.calls += 1
        return [None if c.root == self.host else c.weight for c in cands]


def test_ranking_filters_every_decision():
    client, hosts = _four_hosts()
    drv, _ = start(client)
    ranking = Without(hosts[0])
    roots = {s.root for n in range(1, 7) for s in drv.select_destinations(
        ScheduleRequest((str(uuid.UUID(int=n)),), CandidateRequest({"VCPU": 1}),
                        "p", "u"), ranking=ranking)[0]}
    assert hosts[0] not in roots and len(roots) == 3
    assert ranking.calls == 6
    # the ranking was for those calls only
    roots = {s.root for n in range(7, 9) for s in drv.select_destinations(
        ScheduleRequest((str(uuid.UUID(int=n)),), CandidateRequest({"VCPU": 1}),
                        "p", "u"))[0]}
    assert hosts[0] in roots


def _hosts_beside_a_shared_disk(n: int) -> EngineCandidateSource:
    """The engine's source over ``n`` small hosts (every other one with
    its own disk) in one aggregate with a sharing disk provider."""
    client = EmbeddedPlacement()
    agg = str(uuid.UUID(int=77))
    for i in range(n):
        small_host(client, f"host{i}", disk=i % 2 == 0, aggregates=(agg,))
    add_host(client, "ss", {"DISK_GB": Inventory(5000)}, (agg,), (SHARING_TRAIT,))
    return EngineCandidateSource.build(client, se_driver.make_conf())[1]


def test_candidates_are_the_engines_best_with_their_allocations():
    """The source's candidates, built from the fit's picks, are the
    engine's ``select`` answer: same roots, order, weights, allocations
    (the sharing provider's disk included) and mappings."""
    source = _hosts_beside_a_shared_disk(6)
    query = CandidateRequest({"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 100})
    got = source.candidates(query, limit=4)
    expected = source.index.select(query, weigher=source.weigher, k=4)
    assert [(c.root, c.weight, allocations.copy(c.allocations), c.mappings)
            for c in got] == \
        [(e.root, e.weight, allocations.from_request(e.allocation_request),
          e.allocation_request["mappings"]) for e in expected]
    assert len(got) == 4
    assert any(len(c.allocations) == 2 for c in got)   # disk on the sharing one


def test_holder_root_is_the_compute_root_of_the_allocations():
    """A move's source host, from its old allocations: the root of their
    non-sharing providers (a child provider's root), shared pools left
    out; None when a provider is unknown or the providers span two
    roots."""
    client = EmbeddedPlacement()
    agg = str(uuid.UUID(int=7))
    host = small_host(client, "host1", disk=False, aggregates=(agg,))
    other = small_host(client, "host2")
    pool = add_host(client, "pool", {"DISK_GB": Inventory(1000)},
                    aggregates=(agg,), traits=(SHARING_TRAIT,))
    client.create_resource_class("CUSTOM_PMEM")
    numa = client.create_provider("host1-numa0", parent_provider_uuid=host)
    client.set_inventories(numa.uuid, numa.generation,
                           {"CUSTOM_PMEM": Inventory(4)})
    drv, _ = start(client)
    drv.refresh()
    root = drv.holder_root
    assert root({host: {"VCPU": 1}, pool: {"DISK_GB": 10}}) == host
    assert root({numa.uuid: {"CUSTOM_PMEM": 1}, pool: {"DISK_GB": 10}}) == host
    assert root({pool: {"DISK_GB": 10}}) is None
    assert root({host: {"VCPU": 1}, other: {"VCPU": 1}}) is None
    assert root({host: {"VCPU": 1}, str(uuid.UUID(int=99)): {"VCPU": 1}}) is None


def test_unordered_answers_are_the_ordered_ones_in_another_order():
    """For a ranking that orders every candidate itself, the engine skips
    its sort when nothing is cut: the same candidates (roots, allocations,
    mappings), boots and moves; with a limit that cuts, still its best."""
    source = _hosts_beside_a_shared_disk(8)
    query = CandidateRequest({"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 100})

    def picks(cands):
        return sorted((c.root, sorted(allocations.copy(c.allocations).items()),
                       sorted((c.mappings or {}).items())) for c in cands)

    ordered = source.candidates(query, limit=100)
    unordered = source.candidates(query, limit=100, ordered=False)
    assert picks(unordered) == picks(ordered) and len(ordered) == 8
    rows = [source.index.row(c.root) for c in unordered]   # the index's order
    assert rows == sorted(rows)
    cut = source.candidates(query, limit=3, ordered=False)
    assert [c.root for c in cut] == [c.root for c in ordered[:3]]
    src = ordered[0]
    old = allocations.copy(src.allocations)
    moves = [source.move_candidates(query, limit=100, source=src.root, released=old,
                                    ordered=flag) for flag in (True, False)]
    assert picks(moves[1].others) == picks(moves[0].others) and len(moves[0].others) == 7
    assert moves[1].same_host == moves[0].same_host
