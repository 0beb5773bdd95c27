"""The engine reading placement's database directly agrees with the API."""

import os

import pytest

from scheduler_ext import errors
from scheduler_ext.lab import fleet
from scheduler_ext.placement import AllocationWrite
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
