"""The DISK_GB data migration against a real placement on 127.0.0.1: compute
nodes report their own DISK_GB as nova 34's libvirt driver does beside a
sharing provider, servers hold DISK_GB on them (booted before the sharing
provider existed, and one counted twice), ``scheduler-ext storage sync``
builds the sharing provider and warns, ``storage migrate-disk`` plans
(writing nothing), applies, and a second run moves nothing. Afterwards each
consumer holds its disk exactly once, on the sharing provider, and the
compute nodes offer no DISK_GB."""

from __future__ import annotations

import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.cmd import main as cli
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.storage import topology
from tests.unit.storage.reports import shared

HOSTS = ("cn1", "cn2", "cn3")


def run(placement_url, capsys, *argv):
    """(exit code, the rows as "action what" lines, stderr)."""
    code = cli.main(["storage", *argv, "--placement-url", placement_url,
                     "-f", "value"])
    out, err = capsys.readouterr()
    return code, out, err


def generations(client):
    return {p.uuid: p.generation for p in client.list_providers()}


def test_migrate_disk_moves_every_compute_node_disk_to_the_sharing_provider(
        real_client, private_placement_url, tmp_path, capsys):
    nodes = {}
    for host in HOSTS:
        prov = real_client.create_provider(host)
        real_client.set_inventories(prov.uuid, prov.generation, {
            "VCPU": Inventory(8), "MEMORY_MB": Inventory(16384),
            "DISK_GB": Inventory(400, max_unit=400)})
        nodes[host] = prov.uuid
    servers = {}
    for i in range(6):          # booted before the sharing provider existed
        host = HOSTS[i % 3]
        consumer = str(uuid.uuid4())
        real_client.put_allocations(consumer, AllocationWrite(
            {nodes[host]: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 10 + i}},
            "proj", "user", None))
        servers[consumer] = (host, 10 + i)
    files = []
    for i, host in enumerate(HOSTS):
        report = shared(host, seen=list(HOSTS[:i + 1]))
        path = tmp_path / f"{host}.json"
        path.write_text(report.to_json())
        files.append(str(path))
    code, _, err = run(private_placement_url, capsys, "sync", *files, "--apply")
    assert code == 0
    assert err.count("counted twice (nova bug 1784020)") == 3
    ss = topology.provider_uuid("gpfs:gpfs1")
    twice = str(uuid.uuid4())            # a consumer holding its disk on both
    real_client.put_allocations(twice, AllocationWrite(
        {nodes["cn1"]: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 30},
         ss: {"DISK_GB": 30}}, "proj", "user", None))
    servers[twice] = ("cn1", 30)

    before = generations(real_client)
    code, out, err = run(private_placement_url, capsys, "migrate-disk")
    assert code == 0 and generations(real_client) == before   # dry run
    assert "Leave [DEFAULT] disk_allocation_ratio unset" in out
    assert out.count("would move consumer ") == 7
    assert err.rstrip().endswith(
        "7 consumers to move, 3 compute nodes to close (dry run: --apply "
        "writes them)")

    code, out, err = run(private_placement_url, capsys, "migrate-disk",
                         "--apply")
    assert code == 0, err
    assert out.count("\nmoved consumer ") == 7
    assert out.count("\nclosed compute node ") == 3
    for consumer, (host, disk) in servers.items():
        allocs = real_client.get_consumer(consumer).allocations
        held = {rp: rcs["DISK_GB"] for rp, rcs in allocs.items() if "DISK_GB" in rcs}
        assert held == {ss: disk}, (consumer, allocs)
        assert allocs[nodes[host]] == {"VCPU": 1, "MEMORY_MB": 512}
    assert real_client.get_usages(ss)["DISK_GB"] == sum(
        d for _, d in servers.values())
    for host in HOSTS:
        disk = real_client.get_inventories(nodes[host])[1]["DISK_GB"]
        assert disk.total == 400 and disk.capacity < 1
        assert real_client.get_usages(nodes[host])["DISK_GB"] == 0
    # placement refuses a new DISK_GB allocation on a closed compute node
    with pytest.raises(errors.CapacityExceeded):
        real_client.put_allocations(str(uuid.uuid4()), AllocationWrite(
            {nodes["cn2"]: {"DISK_GB": 1}}, "proj", "user", None))

    before = generations(real_client)
    code, _, err = run(private_placement_url, capsys, "migrate-disk",
                       "--apply")
    assert code == 0 and err.rstrip().endswith(
        "0 consumers moved, 0 compute nodes closed, 0 failed")
    assert generations(real_client) == before
