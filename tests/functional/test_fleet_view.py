"""The fleet view against a real placement: concurrent writers add, move
and remove allocations while the driver schedules; the view is never
optimistic after a poll, claims placement refuses are counted and
recovered from, and after a re-read the view equals placement exactly.
Also: a provider deleted between the list and its read is skipped."""

import random
import threading
import uuid

import pytest

from scheduler_ext import driver as se_driver
from scheduler_ext.lab.fleet import add_host
from scheduler_ext.lab.placement_server import LocalPlacement
from scheduler_ext.moves.request import ScheduleRequest
from scheduler_ext import errors
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.sources.fleet_view import FleetView

HOST = {"VCPU": Inventory(6), "MEMORY_MB": Inventory(16384), "DISK_GB": Inventory(200)}


@pytest.fixture(scope="module")
def placement():
    server = LocalPlacement()
    url = server.start()
    yield url, server.database_url
    server.stop()


@pytest.fixture
def client(placement):
    c = HttpPlacement.from_url(placement[0])
    _empty(c)
    yield c
    _empty(c)


def _empty(c):
    for p in c.list_providers():
        for consumer in c.get_provider_allocations(p.uuid):
            try:
                c.delete_allocations(consumer)
            except errors.NotFound:
                pass
        c.delete_provider(p.uuid)


def _usages(c):
    return {p.uuid: {rc: n for rc, n in c.get_usages(p.uuid).items() if n}
            for p in c.list_providers()}


class Writers:
    """Other writers: each thread boots, moves and deletes its own
    consumers at random (bounded count), one write at a time under
    ``pause`` so a checker can look at placement between writes."""

    def __init__(self, url, hosts, n_threads=2, writes=60, seed=1):
        self.url, self.hosts, self.writes = url, hosts, writes
        self.pause = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(seed + i,))
                        for i in range(n_threads)]
        self.done = 0

    def _run(self, seed):
        rng = random.Random(seed)
        c = HttpPlacement.from_url(self.url)
        mine: list[str] = []
        for _ in range(self.writes):
            with self.pause:
                self._one(c, rng, mine)
            self.done += 1

    def _one(self, c, rng, mine):
        roll = rng.random()
        try:
            if mine and roll < 0.3:
                c.delete_allocations(mine.pop(rng.randrange(len(mine))))
            elif mine and roll < 0.6:      # move: the old host frees, no bump
                cons = mine[rng.randrange(len(mine))]
                cur = c.get_consumer(cons)
                c.put_allocations(cons, cur.write(
                    {rng.choice(self.hosts): {"VCPU": rng.randint(1, 2)}}))
            else:
                cons = str(uuid.UUID(int=rng.getrandbits(128), version=4))
                c.put_allocations(cons, AllocationWrite(
                    {rng.choice(self.hosts): {"VCPU": rng.randint(1, 3)}},
                    "other", "other", None))
                mine.append(cons)
        except errors.Conflict:
            pass                           # a full host: the writer moves on

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        for t in self.threads:
            t.join(timeout=300)


def _never_optimistic(view, c, writers):
    """With no write in flight and after a poll, the view counts at least
    placement's usage on every provider and class."""
    with writers.pause:
        view.refresh()
        truth = _usages(c)
    for rp, used in truth.items():
        held = view.index.usage(rp)
        for rc, n in used.items():
            assert held.get(rc, 0) >= n, (rp, rc, held, used)


@pytest.mark.parametrize("source", ["sql", "api"])
def test_concurrent_writers_view_conservative_then_exact(placement, client, source):
    url, db = placement
    hosts = [add_host(client, f"fv-{i}", HOST) for i in range(6)]
    conf = se_driver.make_conf(
        snapshot_source=source, placement_database_connection=db,
        reread_interval=3600.0, max_claim_attempts=6)
    drv = se_driver.SchedulerDriver(client, conf)
    view: FleetView = drv.upkeep
    writers = Writers(url, hosts)
    writers.start()
    booted, refused = 0, 0
    for n in range(24):
        req = ScheduleRequest((str(uuid.UUID(int=900 + n)),),
                              CandidateRequest({"VCPU": 1}), "p", "u")
        try:
            drv.select_destinations(req, max_alternates=0)
            booted += 1
        except errors.NoValidHost:
            refused += 1
        if n % 4 == 0:
            _never_optimistic(view, client, writers)
    writers.join()
    _never_optimistic(view, client, writers)
    # conflicts counted; each one was recovered from by the next candidate
    stats = drv.strategy.stats
    print(f"{source}: booted {booted}, refused {refused}, stats {dict(stats)}, "
          f"view {view.stats}")
    assert stats["claimed"] == booted and booted + refused == 24
    assert stats["claims"] == stats["claimed"] + stats.get("conflicts", 0)
    view.reread()
    fresh = FleetView(client, conf)
    assert sorted(view.index.live_uuids()) == sorted(hosts)
    for rp in hosts:
        assert view.index.usage(rp) == fresh.index.usage(rp)
        assert {rc: n for rc, n in view.index.usage(rp).items() if n} == \
            {rc: n for rc, n in client.get_usages(rp).items() if n}
        assert view.index.generation(rp) == client.get_provider(rp).generation


class VanishingPlacement(HttpPlacement):
    """A real placement where one provider is deleted right after the list
    and before its read (as another process would)."""

    vanish: str | None = None

    def get_inventories(self, rp_uuid):
        if rp_uuid == self.vanish:
            self.vanish = None
            self.delete_provider(rp_uuid)
        return super().get_inventories(rp_uuid)


def test_refresh_skips_provider_deleted_between_list_and_read(placement, client):
    hosts = [add_host(client, f"gone-{i}", HOST) for i in range(3)]
    vanishing = VanishingPlacement.from_url(placement[0])
    conf = se_driver.make_conf(snapshot_source="api", reread_interval=0.0)
    view = FleetView(vanishing, conf)
    client.put_allocations(str(uuid.UUID(int=77)), AllocationWrite(
        {hosts[2]: {"VCPU": 2}}, "p", "u", None))
    client.create_trait("CUSTOM_MOVED")
    client.set_traits(hosts[1], client.get_provider(hosts[1]).generation,
                      ["CUSTOM_MOVED"])
    vanishing.vanish = hosts[1]
    view.refresh()
    assert sorted(view.index.live_uuids()) == sorted([hosts[0], hosts[2]])
    assert view.index.usage(hosts[2])["VCPU"] == 2


@pytest.mark.parametrize("source", ["sql", "api"])
def test_claim_refused_after_a_racing_write_is_counted_and_recovered(
        placement, client, source):
    """Another writer fills the engine's best host between our poll and our
    claim: placement refuses the claim (counted), the next candidate is
    claimed, and the view is not optimistic about that host afterwards."""
    small = {"VCPU": Inventory(2), "MEMORY_MB": Inventory(4096)}
    hosts = [add_host(client, f"race-{i}", small) for i in range(3)]
    conf = se_driver.make_conf(
        snapshot_source=source, placement_database_connection=placement[1],
        reread_interval=3600.0)
    drv = se_driver.SchedulerDriver(client, conf)
    polled = drv.upkeep.refresh
    raced: list[str] = []

    def refresh_then_race():
        polled()
        if not raced:
            best = drv.source.candidates(CandidateRequest({"VCPU": 1}), limit=1)[0].root
            client.put_allocations(str(uuid.UUID(int=4242)), AllocationWrite(
                {best: {"VCPU": 2}}, "other", "other", None))
            raced.append(best)

    drv.upkeep.refresh = refresh_then_race
    first = drv.select_destinations(ScheduleRequest(
        (str(uuid.UUID(int=1)),), CandidateRequest({"VCPU": 1}), "p", "u"), max_alternates=0)
    assert drv.strategy.stats["conflicts"] == 1
    assert first[0][0].root != raced[0]
    assert drv.upkeep.index.usage(raced[0])["VCPU"] == 2
    for n in range(2, 5):   # the other hosts' 3 remaining VCPUs, no retry
        drv.select_destinations(ScheduleRequest(
            (str(uuid.UUID(int=n)),), CandidateRequest({"VCPU": 1}), "p", "u"), max_alternates=0)
    assert drv.strategy.stats["conflicts"] == 1
    with pytest.raises(errors.NoValidHost):
        drv.select_destinations(ScheduleRequest(
            (str(uuid.UUID(int=5)),), CandidateRequest({"VCPU": 1}), "p", "u"), max_alternates=0)
    assert drv.strategy.stats["conflicts"] == 1


def test_hidden_decrease_never_gives_no_valid_host(placement, client):
    """Regression: allocations leaving a provider bump no generation, so the
    api source's poll misses them (the sql source sees recent deletes in
    its tail) and the view counts them until its re-read. When the
    view then finds no host, it rechecks with placement's candidates
    before saying NoValidHost: the freed host is found at once."""
    small = {"VCPU": Inventory(2), "MEMORY_MB": Inventory(4096)}
    hosts = [add_host(client, f"freed-{i}", small) for i in range(2)]
    filler = [str(uuid.UUID(int=600 + i)) for i in range(2)]
    for consumer, host in zip(filler, hosts):
        client.put_allocations(consumer, AllocationWrite(
            {host: {"VCPU": 2}}, "other", "other", None))
    conf = se_driver.make_conf(snapshot_source="api", reread_interval=3600.0)
    drv = se_driver.SchedulerDriver(client, conf)
    view: FleetView = drv.upkeep
    request = ScheduleRequest((str(uuid.UUID(int=7)),),
                              CandidateRequest({"VCPU": 1}), "p", "u")
    with pytest.raises(errors.NoValidHost):
        drv.select_destinations(request, max_alternates=0)
    client.delete_allocations(filler[1])
    view.refresh()
    assert view.index.usage(hosts[1])["VCPU"] == 2     # still counted
    chosen = drv.select_destinations(request, max_alternates=0)[0][0]
    assert chosen.root == hosts[1]
    assert view.stats["rechecks"] == 1    # placement offered nothing the first time
    assert client.get_consumer(str(uuid.UUID(int=7))).allocations == \
        {hosts[1]: {"VCPU": 1}}
