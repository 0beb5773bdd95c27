"""Shared storage from the real topology against a real placement on
127.0.0.1: three hosts (reports built from mountinfo fixtures) on two
storage domains become two sharing providers with their aggregates through
``scheduler-ext storage sync``; a second sync writes nothing; the scheduler
then places, resizes and migrates servers whose DISK_GB lands on the
sharing provider of their host's domain."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler_ext.cmd import main as cli
from scheduler_ext.driver import SchedulerDriver, make_conf
from scheduler_ext.lab import invariants
from scheduler_ext.lab.nova_model import NovaModel
from scheduler_ext.moves.reconcile import Reconciler
from scheduler_ext.placement import Inventory
from scheduler_ext.placement.model import SHARING_TRAIT
from scheduler_ext.storage import topology
from tests.unit.storage.fakefs import Storage
from tests.unit.storage.hosts import discover, host_with

NFS = "nfs:filer01.example.net:/export/nova"
GPFS_FS = "gpfs:gpfs1"                 # the filesystems (one provider each)
NFS_FS = NFS                           # an export is its own filesystem
SMALL = {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 100}


def scheduler(client) -> NovaModel:
    """The one place this test builds the scheduler: our driver with the
    default options, behind nova's modelled conductor and compute (which
    build each ScheduleRequest((instance,), CandidateRequest(flavor),
    project, user, move=...))."""
    driver = SchedulerDriver(client, make_conf())
    return NovaModel(client, driver.select_destinations)


def reports():
    """cn1 and cn2 share one GPFS pool directory (cn1 through the cluster
    mount, cn2 through a bind mount); cn3 is on NFS."""
    gpfs = Storage(total_gib=1000, free_gib=900, available_gib=890,
                   dirs=["/pool/instances"])
    nfs = Storage(total_gib=500, free_gib=500)
    cn1 = discover(host_with("/gpfs1", gpfs, (0, 45)), "gpfs_pool_subdir",
                   "/gpfs1/pool/instances", host="cn1")
    cn2 = discover(host_with("/var/lib/nova/instances", gpfs, (0, 45),
                             root="/pool/instances"), "gpfs_bind",
                   "/var/lib/nova/instances", host="cn2")
    cn3 = discover(host_with("/var/lib/nova/instances", nfs, (0, 80)), "nfs",
                   "/var/lib/nova/instances", host="cn3")
    return [cn1, cn2, cn3]


def generations(client) -> dict:
    return {p.name: client.get_inventories(p.uuid)[0] for p in client.list_providers()}


def sync(placement_url, files, capsys, *extra):
    code = cli.main(["storage", "sync", *map(str, files), "--placement-url",
                     placement_url, "-f", "value", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out + err


@pytest.fixture
def fleet(real_client, private_placement_url, tmp_path, capsys):
    """Compute nodes as nova creates them (no DISK_GB: their disk is
    shared), the reports on disk, and one applied sync."""
    for host in ("cn1", "cn2", "cn3"):
        prov = real_client.create_provider(host)
        real_client.set_inventories(prov.uuid, prov.generation, {
            "VCPU": Inventory(8), "MEMORY_MB": Inventory(16384)})
    files = []
    for report in reports():
        path = tmp_path / f"{report.host}.json"
        path.write_text(report.to_json())
        files.append(path)
    dry = sync(private_placement_url, files, capsys)
    assert "11 changes (dry run: --apply writes them)" in dry
    assert len(real_client.list_providers()) == 3         # a dry run writes nothing
    applied = sync(private_placement_url, files, capsys, "--apply")
    assert "write " in applied and "11 changes" in applied
    return files


def test_three_hosts_on_two_domains_become_two_sharing_providers(
        real_client, fleet):
    by_name = {p.name: p.uuid for p in real_client.list_providers()}
    for fs, members, total, reserved in ((GPFS_FS, ("cn1", "cn2"), 1000, 10),
                                         (NFS_FS, ("cn3",), 500, 0)):
        ss = topology.provider_uuid(fs)
        agg = topology.aggregate_uuid(fs)
        assert by_name[topology.provider_name(fs)] == ss
        inv = real_client.get_inventories(ss)[1]["DISK_GB"]
        assert (inv.total, inv.reserved, inv.max_unit) == (total, reserved, total)
        assert SHARING_TRAIT in real_client.get_traits(ss)[1]
        assert real_client.get_aggregates(ss)[1] == {agg}
        for host in members:
            assert real_client.get_aggregates(by_name[host])[1] == {agg}


def test_a_second_sync_writes_nothing(real_client, private_placement_url, fleet,
                                      tmp_path, capsys):
    """Run the way doc/source/operating.rst shows: placement from
    nova.conf."""
    nova_conf = tmp_path / "nova.conf"
    nova_conf.write_text(f"""
[placement]
auth_type = admin_token
endpoint = {private_placement_url}
token = admin
""")
    before = generations(real_client)
    code = cli.main(["storage", "sync", "--config-file", str(nova_conf),
                     "--apply", *map(str, fleet)])
    err = capsys.readouterr().err
    assert code == 0 and err.rstrip().endswith("0 changes")
    assert generations(real_client) == before


def _disk_provider(client, server_uuid):
    allocs = client.get_consumer(server_uuid).allocations
    return {rp for rp, rcs in allocs.items() if "DISK_GB" in rcs}


def _expected_sharing(client, host_uuid):
    """The sharing provider in the same aggregate as the host."""
    _, aggs = client.get_aggregates(host_uuid)
    return {topology.provider_uuid(fs) for fs in (GPFS_FS, NFS_FS)
            if topology.aggregate_uuid(fs) in aggs}


def test_scheduler_places_and_moves_disks_on_the_right_sharing_provider(
        real_client, fleet):
    model = scheduler(real_client)
    servers = [model.boot(SMALL) for _ in range(6)]
    for server in servers:
        assert _disk_provider(real_client, server.uuid) == \
            _expected_sharing(real_client, server.host)
    nfs, gpfs = topology.provider_uuid(NFS_FS), topology.provider_uuid(GPFS_FS)
    on_nfs = [s for s in servers if _disk_provider(real_client, s.uuid) == {nfs}]
    assert on_nfs, "no server landed on the NFS host"
    server = on_nfs[0]
    free = 500 - real_client.get_usages(nfs)["DISK_GB"]
    # growing by exactly what NFS has left fits in place (the old disk is
    # released first): the server keeps its host and its disk on NFS
    move = model.resize(server.uuid, {**SMALL, "DISK_GB": 100 + free})
    assert move.dest == move.source
    assert real_client.get_consumer(server.uuid).allocations[nfs] == \
        {"DISK_GB": 100 + free}
    model.revert(server.uuid)
    Reconciler(real_client).run(model.states(), apply=True)
    assert real_client.get_usages(nfs)["DISK_GB"] == 500 - free
    # one GiB more does not: it moves to a GPFS host, the new disk on GPFS,
    # the old one still held on NFS by the migration until the confirm
    move = model.resize(server.uuid, {**SMALL, "DISK_GB": 101 + free})
    assert move.dest != move.source
    assert _disk_provider(real_client, server.uuid) == {gpfs}
    assert nfs in real_client.get_consumer(move.migration_uuid).allocations
    model.confirm(server.uuid)
    assert _disk_provider(real_client, server.uuid) == {gpfs}
    # a resize that fits stays in its domain, on whichever host is chosen
    other = next(s for s in servers if s is not server)
    model.resize(other.uuid, {**SMALL, "VCPU": 2})
    model.confirm(other.uuid)
    assert _disk_provider(real_client, other.uuid) == \
        _expected_sharing(real_client, model.servers[other.uuid].host)
    assert invariants.check_providers(real_client) == []
    assert invariants.check_servers(real_client, model.states(), exact=True) == []


def test_shrinking_below_the_allocated_disk_is_refused_and_writes_nothing(
        real_client, private_placement_url, fleet, tmp_path, capsys):
    model = scheduler(real_client)
    nfs = topology.provider_uuid(NFS_FS)
    while real_client.get_usages(nfs).get("DISK_GB", 0) < 300:
        model.boot(SMALL)
    cn3 = next(r for r in reports() if r.host == "cn3")
    smaller = tmp_path / "cn3-smaller.json"
    smaller.write_text(dataclasses.replace(cn3, total_bytes=200 * 1024 ** 3)
                       .to_json())
    before = generations(real_client)
    code = cli.main(["storage", "sync", str(smaller), "--placement-url",
                     private_placement_url, "--apply"])
    out = capsys.readouterr().err
    assert code == 1
    assert "refused: " in out and "below the 300 GiB allocated" in out
    assert out.rstrip().endswith("nothing written")
    assert generations(real_client) == before
    assert real_client.get_inventories(nfs)[1]["DISK_GB"].total == 500
