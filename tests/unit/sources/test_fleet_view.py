"""FleetView: the request path costs what changed, decreases arrive from a
background re-read that never blocks it, and the safe defaults (source
choice, start checks and logs, fallback when the database goes away)."""

import logging
import threading
import time
import uuid

import pytest

from scheduler_ext import driver as se_driver
from scheduler_ext import errors
from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.model import FleetSnapshot, Provider, ProviderRecord
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.sources import fleet_view
from scheduler_ext.sources.changes import ApiChanges, IndexUpdate
from scheduler_ext.sources.fleet_view import FleetView
from tests.unit.helpers import small_host
from tests.unit.sources.placement_tables import PlacementTables

FULL = {"VCPU": 2, "MEMORY_MB": 8192, "DISK_GB": 1028}


def consumer(n):
    return str(uuid.UUID(int=50_000 + n))


class CountingClient(EmbeddedPlacement):
    """The embedded placement, counting per-provider reads; ``vanish``
    names providers deleted right before their inventories are read (a
    provider deleted between the list and its read)."""

    def __init__(self):
        super().__init__()
        self.inventory_reads: list[str] = []
        self.vanish: set[str] = set()

    def get_inventories(self, rp_uuid):
        if rp_uuid in self.vanish:
            self.vanish.discard(rp_uuid)
            for c in self.get_provider_allocations(rp_uuid):
                self.delete_allocations(c)
            self.delete_provider(rp_uuid)
        self.inventory_reads.append(rp_uuid)
        return super().get_inventories(rp_uuid)


def _conf(**opts):
    return se_driver.make_conf(**{"reread_interval": 0.0, **opts})


def _hosts(n=5):
    client = CountingClient()
    return client, [small_host(client, f"host{i}") for i in range(n)]


def _put(client, n, allocs):
    client.put_allocations(consumer(n), AllocationWrite(allocs, "p", "u", None))


def _rewrite(client, n, allocs):
    held = client.get_consumer(consumer(n))
    client.put_allocations(consumer(n), held.write(allocs, project_id="p", user_id="u"))


def test_api_poll_rereads_only_providers_whose_generation_moved():
    client, hosts = _hosts()
    view = FleetView(client, _conf(), source=ApiChanges(client))
    client.inventory_reads.clear()
    _put(client, 1, {hosts[2]: {"VCPU": 1}})
    view.refresh()
    assert client.inventory_reads == [hosts[2]]
    assert view.index.usage(hosts[2])["VCPU"] == 1
    client.inventory_reads.clear()
    view.refresh()
    assert client.inventory_reads == []


def test_api_refresh_skips_provider_deleted_between_list_and_read():
    client, hosts = _hosts()
    view = FleetView(client, _conf(), source=ApiChanges(client))
    _put(client, 1, {hosts[1]: {"VCPU": 1}})
    _put(client, 2, {hosts[3]: {"VCPU": 2}})
    client.vanish.add(hosts[1])
    view.refresh()
    assert hosts[1] not in view.index.live_uuids()
    assert view.index.usage(hosts[3])["VCPU"] == 2


def test_api_full_read_skips_provider_deleted_between_list_and_read():
    client, hosts = _hosts()
    client.vanish.add(hosts[0])
    view = FleetView(client, _conf(), source=ApiChanges(client))
    assert sorted(view.index.live_uuids()) == sorted(hosts[1:])


def _record(rc):
    u = str(uuid.UUID(int=7))
    return ProviderRecord(Provider(u, "cn", 1, u),
                          {"VCPU": Inventory(8), rc: Inventory(4)},
                          {"VCPU": 1, rc: 1}, frozenset(), frozenset())


def test_index_builds_with_a_standard_class_unknown_to_os_resource_classes():
    index = CapacityIndex.from_snapshot(FleetSnapshot((_record("FUTURE_STANDARD_RC"),)))
    assert index.usage(str(uuid.UUID(int=7))) == {"VCPU": 1, "FUTURE_STANDARD_RC": 1}
    assert len(index.fit(CandidateRequest({"VCPU": 7}))) == 1
    index = CapacityIndex.from_snapshot(FleetSnapshot(()))
    index.refresh_provider(_record("ANOTHER_NEW_STANDARD_RC"))
    assert len(index.fit(CandidateRequest({"VCPU": 2}))) == 1


class StaticSource:
    """A change source returning what it is given (for the view's rules)."""

    name = "static"

    def __init__(self, snapshot, reread=None):
        self.snapshot = snapshot
        self.reread_changes = reread or IndexUpdate(usages=[])
        self.reading = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.reads: dict[str, ProviderRecord] = {}

    def full_read(self):
        return self.snapshot

    def poll(self, index):
        return IndexUpdate()

    def read(self, uuids):
        return IndexUpdate([self.reads[u] for u in uuids])

    def reread(self, index):
        self.reading.set()
        assert self.release.wait(10)
        return self.reread_changes

    def tracking_bytes(self):
        return 0


def test_fleet_view_with_a_new_standard_class_from_its_source():
    view = FleetView(None, _conf(), source=StaticSource(
        FleetSnapshot((_record("FUTURE_STANDARD_RC"),))))
    assert len(view.index) == 1


def test_background_reread_never_blocks_a_refresh():
    rec = _record("VCPU")
    source = StaticSource(FleetSnapshot((rec,)),
                          IndexUpdate(usages=[(rec.provider.uuid, "VCPU", 0)]))
    source.release.clear()
    view = FleetView(None, _conf(reread_interval=0.01), source=source)
    time.sleep(0.02)
    assert view.reread_if_due()          # starts the re-read, returns
    assert source.reading.wait(5)
    started = time.monotonic()
    view.refresh()                       # while the re-read is stuck reading
    assert time.monotonic() - started < 1.0
    assert view.index.usage(rec.provider.uuid)["VCPU"] == 1
    source.release.set()
    view.reread()                        # waits for the running one
    assert view.index.usage(rec.provider.uuid)["VCPU"] == 0


def _reread_stuck_reading():
    """(view, source, record): a background re-read is in flight, stuck
    after reading usage 0 for the record's provider until
    ``source.release`` is set."""
    rec = _record("VCPU")
    source = StaticSource(FleetSnapshot((rec,)),
                          IndexUpdate(usages=[(rec.provider.uuid, "VCPU", 0)]))
    source.release.clear()
    view = FleetView(None, _conf(reread_interval=0.01), source=source)
    time.sleep(0.02)
    assert view.reread_if_due()
    assert source.reading.wait(5)
    return view, source, rec


def _finish_reread(view, source):
    source.release.set()
    for _ in range(100):
        if view.stats["rereads"]:
            break
        time.sleep(0.05)
    assert view.stats["rereads"] == 1


def test_tree_structure_is_built_at_start_and_after_a_reread_not_in_a_request(
        monkeypatch):
    """Regression: the first query after the start (and after a re-read
    that removed a provider) built the index's tree structure, O(fleet)."""
    from scheduler_ext.engine.fleet import trees
    client, hosts = _hosts()
    view = FleetView(client, _conf(), source=ApiChanges(client))
    built = []
    real = trees.tree_aggregates
    monkeypatch.setattr(trees, "tree_aggregates",
                        lambda *a: built.append(1) or real(*a))
    query = CandidateRequest({"VCPU": 1})
    assert len(view.index.fit(query)) == 5
    client.delete_provider(hosts[3])
    view.reread()
    assert built == [1]                  # in the re-read, not in the query
    assert hosts[3] not in view.index.fit(query).uuids()
    assert built == [1]


def test_a_due_reread_starts_once_the_decision_is_answered_not_beside_it(
        monkeypatch):
    """Regression: the refresh a decision starts with started the due
    background re-read, which then ran beside that decision (at 49,500
    providers, 1.7 s of the process's time and its collections: the
    benchmark's resizes took 3 times as long). The driver starts it once
    the decision is answered, a refused one too."""
    from scheduler_ext.moves.request import ScheduleRequest
    client, _ = _hosts()
    drv = se_driver.SchedulerDriver(client, _conf(reread_interval=0.01))
    view = drv.upkeep
    events = []
    monkeypatch.setattr(view, "start_reread", lambda: events.append("reread") or True)
    decide = drv.strategy.select
    monkeypatch.setattr(drv.strategy, "select",
                        lambda *a, **k: events.append("decide") or decide(*a, **k))

    def request(vcpus):
        return ScheduleRequest((str(uuid.uuid4()),), CandidateRequest({"VCPU": vcpus}),
                               "p", "u")

    time.sleep(0.02)
    view.refresh()
    assert events == []                  # a refresh never starts it
    drv.select_destinations(request(1))
    assert events == ["decide", "reread"]
    time.sleep(0.02)
    with pytest.raises(errors.NoValidHost):
        drv.select_destinations(request(64))
    assert events[2:] == ["decide", "reread"]


def test_reread_in_flight_does_not_undo_a_newer_read():
    view, source, rec = _reread_stuck_reading()
    u = rec.provider.uuid
    source.reads[u] = ProviderRecord(
        Provider(u, "cn", 2, u), rec.inventories, {"VCPU": 5}, frozenset(), frozenset())
    view.changed([u])
    _finish_reread(view, source)
    assert view.index.usage(u)["VCPU"] == 5


def test_auto_source_reads_the_database_when_its_url_is_set(tmp_path, caplog):
    tables = PlacementTables(str(tmp_path / "p.sqlite"))
    host = tables.add_provider(1)
    tables.put(consumer(1), {host: {"VCPU": 3}})
    caplog.set_level(logging.INFO, logger="scheduler_ext")
    view = FleetView(EmbeddedPlacement(), _conf(placement_database_connection=tables.url))
    assert view.source.name == "sql"
    assert view.index.usage(host)["VCPU"] == 3
    started = [r.getMessage() for r in caplog.records if "full read" in r.getMessage()]
    assert len(started) == 1 and "source sql" in started[0] and "1 providers" in started[0]


def test_api_source_without_database_url():
    client, _ = _hosts(1)
    conf = se_driver.make_conf()
    assert fleet_view.choose_source(client, conf).name == "change-feed"
    assert conf.scheduler_ext.snapshot_source == "auto"


def test_unreachable_database_at_start_names_the_option_and_the_host():
    url = "postgresql+psycopg2://placement@127.0.0.1:1/placement"
    with pytest.raises(errors.ConfigError) as err:
        FleetView(EmbeddedPlacement(), _conf(placement_database_connection=url))
    assert err.value.option == "placement_database_connection"
    assert "placement_database_connection" in str(err.value)
    assert "127.0.0.1:1" in str(err.value)
    assert "placement@" not in str(err.value)
    # our own database read, never dressed as an answer of placement's API
    assert "placement.undefined_code" not in str(err.value)
    assert "503" not in str(err.value)


def test_database_lost_later_falls_back_to_the_api_with_a_warning(tmp_path, caplog):
    path = tmp_path / "p.sqlite"
    tables = PlacementTables(str(path))
    client, hosts = _hosts(2)
    for h in hosts:             # the same fleet in both, as in a deployment
        tables.add_provider(int(uuid.UUID(h)))
    view = FleetView(client, _conf(placement_database_connection=tables.url))
    assert view.source.name == "sql"
    path.write_bytes(b"this is no longer a database" * 100)
    _put(client, 1, {hosts[1]: {"VCPU": 2}})
    caplog.set_level(logging.WARNING)
    view.refresh()
    assert view.source.name == "api"
    assert view.stats["fallbacks"] == 1
    assert view.index.usage(hosts[1])["VCPU"] == 2
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("falling back to placement's API" in m for m in warned)
    assert not any("placement.undefined_code" in m for m in warned)


def test_consumer_read_falls_back_to_the_api_when_the_database_is_lost(tmp_path, caplog):
    path = tmp_path / "p.sqlite"
    tables = PlacementTables(str(path))
    client, hosts = _hosts(1)
    tables.add_provider(int(uuid.UUID(hosts[0])))
    view = FleetView(client, _conf(placement_database_connection=tables.url))
    _put(client, 3, {hosts[0]: {"VCPU": 1}})
    path.write_bytes(b"this is no longer a database" * 100)
    caplog.set_level(logging.WARNING)
    assert view.consumer(consumer(3)) == client.get_consumer(consumer(3))
    assert view.source.name == "api" and view.stats["fallbacks"] == 1
    assert any("falling back to placement's API" in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)


def test_slow_api_full_read_warns_once(monkeypatch, caplog):
    monkeypatch.setattr(fleet_view, "SLOW_API_READ", -1.0)
    monkeypatch.setattr(FleetView, "warned_slow_api", False)
    caplog.set_level(logging.WARNING)
    client, _ = _hosts(2)
    FleetView(client, _conf(), source=ApiChanges(client))
    FleetView(client, _conf(), source=ApiChanges(client))
    loud = [r for r in caplog.records if "placement_database_connection" in r.getMessage()]
    assert len(loud) == 1 and loud[0].levelno == logging.WARNING


def test_full_host_frees_after_reread_with_api_source():
    client, hosts = _hosts(1)
    _put(client, 1, {hosts[0]: FULL})
    view = FleetView(client, _conf(), source=ApiChanges(client))
    client.delete_allocations(consumer(1))      # no generation moves
    view.refresh()
    assert not len(view.index.fit(CandidateRequest(FULL)))   # conservative
    view.reread()
    assert len(view.index.fit(CandidateRequest(FULL))) == 1


def test_own_write_enters_the_view_without_a_read():
    """A claim's usage is in the view at once, with no provider read; the
    next poll takes placement's figure for those providers, which equals it
    (nothing counted twice)."""
    client, hosts = _hosts()
    view = FleetView(client, _conf(), source=ApiChanges(client))
    before = {hosts[0]: {"VCPU": 1, "MEMORY_MB": 512}}
    _put(client, 1, before)
    view.refresh()
    after = {hosts[0]: {"VCPU": 2, "MEMORY_MB": 512}, hosts[1]: {"DISK_GB": 10}}
    _rewrite(client, 1, after)   # the write our claim made
    client.inventory_reads.clear()
    view.wrote(before, after)
    assert client.inventory_reads == []
    assert view.stats["own_writes"] == 1
    assert view.index.usage(hosts[0]) == {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 0}
    assert view.index.usage(hosts[1])["DISK_GB"] == 10
    # a move of the same flavor away from host0: a decrease, applied too
    view.wrote(after, {hosts[1]: {"DISK_GB": 10}})
    assert view.index.usage(hosts[0])["VCPU"] == 0
    _rewrite(client, 1, {hosts[1]: {"DISK_GB": 10}})
    view.refresh()
    for rp in hosts:
        assert view.index.usage(rp) == {rc: u for rc, u in client.get_usages(rp).items()}


def test_own_write_on_a_provider_the_view_lacks_reads_it():
    client, hosts = _hosts()
    view = FleetView(client, _conf(), source=ApiChanges(client))
    late = small_host(client, "late")          # not in the view yet
    _put(client, 1, {late: {"VCPU": 1}})
    view.wrote({}, {late: {"VCPU": 1}})
    assert view.index.usage(late)["VCPU"] == 1


def test_own_write_during_a_reread_is_kept():
    view, source, rec = _reread_stuck_reading()   # it read before our write
    u = rec.provider.uuid
    view.wrote({}, {u: {"VCPU": 3}})
    _finish_reread(view, source)
    assert view.index.usage(u)["VCPU"] == 1 + 3
