"""The engine reading placement's database directly agrees with the API."""

import os

import pytest

from scheduler_ext import errors
from scheduler_ext.lab import fleet
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.sql_snapshot import SqlSnapshot
from scheduler_ext.lab.placement_server import LocalPlacement
from tests.unit.helpers import FLAVOR1, FLAVOR2, small_host, start


@pytest.fixture(scope="module")
def db_placement():
    server = LocalPlacement()
    url = server.start()
    yield url, "sqlite:///" + os.path.join(server._dir, "placement.sqlite")
    server.stop()


def test_sql_snapshot_equals_api_snapshot(db_placement):
    from scheduler_ext.placement.http import HttpPlacement
    url, db = db_placement
    client = HttpPlacement.from_url(url)
    built = fleet.build(client, hosts=5, sharing=2, seed=4, prefix="sql-")
    client.put_allocations("aaaaaaaa-0000-4000-8000-000000000001", AllocationWrite(
        {built.hosts[0]: {"VCPU": 3}}, "p", "u", None))
    api = {r.provider.uuid: r for r in client.snapshot().providers}
    sql = {r.provider.uuid: r for r in SqlSnapshot(db).snapshot().providers}
    assert api == sql
    part = SqlSnapshot(db).snapshot([built.hosts[0], built.sharing[1]])
    assert {r.provider.uuid: r for r in part.providers} == {
        u: api[u] for u in (built.hosts[0], built.sharing[1])}


def test_engine_sql_source_follows_moves(db_placement):
    from scheduler_ext.placement.http import HttpPlacement
    url, db = db_placement
    client = HttpPlacement.from_url(url)
    for p in client.list_providers():          # start empty
        for c in client.get_provider_allocations(p.uuid):
            client.delete_allocations(c)
        client.delete_provider(p.uuid)
    host = small_host(client)
    _, model = start(client, snapshot_source="sql", placement_database_connection=db)
    server = model.boot(FLAVOR1)
    move = model.resize(server.uuid, FLAVOR2)
    assert move.dest == host
    model.confirm(server.uuid)
    # DELETE /allocations bumps no provider generation: the engine must still
    # see the space come back, or this full-host boot would find no host
    model.delete(server.uuid)
    full = model.boot({"VCPU": 2, "MEMORY_MB": 8192, "DISK_GB": 1028})
    assert full.host == host


def test_bad_database_url_is_a_clear_error():
    with pytest.raises(errors.PlacementUnavailable, match="placement database"):
        SqlSnapshot("sqlite:////nonexistent/dir/placement.sqlite").generations()


def test_consumer_read_from_the_database_equals_the_api(db_placement):
    """Every field GET /allocations/{consumer} shows, for consumers on a
    host and a sharing provider, of both types, with a custom class, and
    for consumers that hold nothing (never written, and deleted)."""
    from scheduler_ext.placement.http import HttpPlacement
    url, db = db_placement
    client = HttpPlacement.from_url(url)
    built = fleet.build(client, hosts=3, sharing=1, seed=7, prefix="cons-")
    host, pool = built.hosts[1], built.sharing[0]
    client.create_resource_class("CUSTOM_LICENSE")
    generation, inv = client.get_inventories(host)
    client.set_inventories(host, generation, {**inv, "CUSTOM_LICENSE": Inventory(4)})
    writes = {
        "bbbbbbbb-0000-4000-8000-000000000001": AllocationWrite(
            {host: {"VCPU": 2, "MEMORY_MB": 512, "CUSTOM_LICENSE": 1}, pool: {"DISK_GB": 10}},
            "proj-a", "user-a", None, "INSTANCE"),
        "bbbbbbbb-0000-4000-8000-000000000002": AllocationWrite(
            {built.hosts[2]: {"VCPU": 1}}, "proj-b", "user-b", None, "MIGRATION"),
    }
    client.post_allocations(writes)
    gone = "bbbbbbbb-0000-4000-8000-000000000003"
    client.put_allocations(gone, AllocationWrite(
        {host: {"VCPU": 1}}, "proj-a", "user-a", None))
    client.delete_allocations(gone)
    sql = SqlSnapshot(db)
    for consumer in [*writes, gone, "bbbbbbbb-0000-4000-8000-00000000ffff"]:
        assert sql.consumer(consumer) == client.get_consumer(consumer), consumer
    held = sql.consumer("bbbbbbbb-0000-4000-8000-000000000002")
    assert held.consumer_type == "MIGRATION" and held.generation is not None


def test_consumer_read_rejects_a_malformed_uuid(db_placement):
    _, db = db_placement
    with pytest.raises(errors.InvalidRequest, match="consumer_uuid"):
        SqlSnapshot(db).consumer("not-a-uuid")


def test_driver_reads_a_consumer_from_the_database_not_the_api(db_placement):
    """With the sql source a move's consumer read makes no GET (it is on
    the request path of every resize nova schedules)."""
    from scheduler_ext.placement.http import HttpPlacement
    url, db = db_placement
    client = HttpPlacement.from_url(url)
    host = small_host(client, name="cons-read-host")
    consumer = "bbbbbbbb-0000-4000-8000-000000000010"
    client.put_allocations(consumer, AllocationWrite(
        {host: {"VCPU": 1}}, "p", "u", None, "MIGRATION"))
    drv, _ = start(client, snapshot_source="sql", placement_database_connection=db)
    gets = []
    real = client.get_consumer
    client.get_consumer = lambda c: gets.append(c) or real(c)
    assert drv.read_consumer(consumer) == real(consumer)
    assert gets == []
    # without the sql source the driver reads through placement's API
    drv_api, _ = start(client, snapshot_source="api")
    assert drv_api.read_consumer(consumer).allocations == {host: {"VCPU": 1}}
    assert gets == [consumer]
