"""``scheduler-ext audit`` against a real placement: dry run, apply one fix
at a time, stop at the first error, and bad input refused before anything
is read from or written to placement."""

import json

import pytest

from scheduler_ext.cmd import main as cli
from scheduler_ext.lab import invariants
from scheduler_ext.moves.reconcile import dump_instances
from tests.functional.faultproxy import FaultProxy
from tests.unit.helpers import FLAVOR1, FLAVOR2, MAX12, small_host, start


def _reverted(client, name="host1"):
    host = small_host(client, name)
    _, model = start(client)
    server = model.boot(FLAVOR1)
    model.resize(server.uuid, FLAVOR2)
    model.revert(server.uuid)
    return host, model, server


def test_audit_dry_run_then_apply(real_client, private_placement_url, tmp_path, capsys):
    host, model, server = _reverted(real_client)
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(dump_instances(model.states())))
    args = ["audit", "--placement-url", private_placement_url,
            "--instances", str(path)]
    assert cli.main(args) == 1
    out = "".join(capsys.readouterr())
    assert f"instance {server.uuid}" in out and "would apply" in out
    assert real_client.get_consumer(server.uuid).allocations == {host: MAX12}
    assert cli.main(args + ["--apply"]) == 0
    out = "".join(capsys.readouterr())
    assert f"fix 1/1 applied: instance {server.uuid}" in out
    assert "1 applied, 0 failed, 0 not attempted; after the fixes 0 provider" in out
    assert real_client.get_consumer(server.uuid).allocations == {host: FLAVOR1}
    assert cli.main(args) == 0
    assert "0 reconcile fixes" in "".join(capsys.readouterr())


def test_audit_json_format_and_export(real_client, private_placement_url, tmp_path,
                                      capsys):
    _, model, server = _reverted(real_client)
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(dump_instances(model.states())))
    export = tmp_path / "export.json"
    assert cli.main(["audit", "--placement-url", private_placement_url,
                     "--instances", str(path), "--export", str(export),
                     "-f", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [r["subject"] for r in rows if r["kind"] == "fix"] == \
        [f"instance {server.uuid}"]
    assert [r["state"] for r in rows if r["kind"] == "fix"] == ["would apply"]
    assert json.loads(export.read_text()) == json.loads(path.read_text())


def test_audit_reports_migration_leftovers(real_client, private_placement_url, capsys):
    host = small_host(real_client)
    _, model = start(real_client)
    server = model.boot(FLAVOR1)
    mig = model.resize(server.uuid, {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 1028},
                       allow_same_host=True)
    assert mig.dest == host
    assert cli.main(["audit", "--placement-url", private_placement_url]) == 0
    assert "0 provider problems, 0 migration allocations" in "".join(capsys.readouterr())


def test_apply_stops_at_the_first_error_and_says_what_was_written(
        real_client, private_placement_url, tmp_path, capsys):
    """Two fixes; placement refuses the second: the first stays written,
    the second is named as not written, exit 1."""
    small_host(real_client, "host1")
    small_host(real_client, "host2")
    _, model = start(real_client)
    servers = [model.boot(FLAVOR1) for _ in range(2)]   # one per host (disk)
    for server in servers:
        model.resize(server.uuid, FLAVOR2)
        model.revert(server.uuid)
    states = model.states()
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(dump_instances(states)))
    proxy = FaultProxy(private_placement_url)
    proxy.fail("POST", "/allocations", 409, code="placement.concurrent_update",
               after=1, count=10)
    with proxy as url:
        code = cli.main(["audit", "--placement-url", url, "--instances", str(path),
                         "--apply"])
    out = "".join(capsys.readouterr())
    assert code == 1
    first, second = servers     # fixes follow the instances' order
    assert f"fix 1/2 applied: instance {first.uuid}" in out
    assert f"fix 2/2 FAILED: instance {second.uuid}" in out
    assert f"stopped: 1 fix(es) written (instance {first.uuid}); this one and 0 " \
           "after it not written" in out
    held = {s.uuid: real_client.get_consumer(s.uuid).allocations for s in servers}
    assert list(held[first.uuid].values()) == [FLAVOR1]
    assert list(held[second.uuid].values()) == [MAX12]


BAD_INSTANCES = {
    "object": ({"a": 1}, "must be a JSON list of instances, got dict"),
    "list of strings": (["x"], "entry 0: must be an object, got 'x'"),
    "number": (5, "must be a JSON list of instances, got int"),
    "negative VCPU": (None, "resources.VCPU: must be a positive integer, got -2"),
    "words for memory": (None, "resources.MEMORY_MB: must be a positive integer, "
                               "got 'lots'"),
    "good then bad uuid": (None, "entry 1: uuid: not a UUID: 'not-a-uuid'"),
}


@pytest.mark.parametrize("case", sorted(BAD_INSTANCES))
def test_bad_instances_file_exit_2_nothing_written(
        case, real_client, private_placement_url, tmp_path, capsys):
    _, model, server = _reverted(real_client)
    good = dump_instances(model.states())[0]
    data, message = BAD_INSTANCES[case]
    if case == "negative VCPU":
        data = [dict(good, resources=dict(good["resources"], VCPU=-2))]
    elif case == "words for memory":
        data = [dict(good, resources=dict(good["resources"], MEMORY_MB="lots"))]
    elif case == "good then bad uuid":
        data = [good, dict(good, uuid="not-a-uuid")]
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(data))
    before = invariants.state(real_client)
    assert cli.main(["audit", "--placement-url", private_placement_url,
                     "--instances", str(path), "--apply"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and f"--instances {path}" in err[0] and message in err[0]
    assert "Traceback" not in captured.err
    assert invariants.state(real_client) == before


def test_audit_placement_down_is_a_clear_error(capsys):
    assert cli.main(["audit", "--placement-url", "http://127.0.0.1:9"]) == 3
    err = capsys.readouterr().err
    assert "placement unreachable: connection refused" in err
    assert "placement.undefined_code" not in err and len(err.splitlines()) == 1
