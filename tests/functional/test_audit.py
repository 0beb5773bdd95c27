"""``scheduler-ext audit`` against a real placement."""

import json

from scheduler_ext.cmd import main as cli
from scheduler_ext.moves.reconcile import dump_instances
from tests.unit.helpers import FLAVOR1, FLAVOR2, MAX12, small_host, start


def _reverted(client):
    host = small_host(client)
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
    out = capsys.readouterr().out
    assert f"instance {server.uuid}" in out and "would apply" in out
    assert real_client.get_consumer(server.uuid).allocations == {host: MAX12}
    assert cli.main(args + ["--apply"]) == 0
    assert "[applied]" in capsys.readouterr().out
    assert real_client.get_consumer(server.uuid).allocations == {host: FLAVOR1}
    assert cli.main(args) == 0
    assert "0 reconcile fixes" in capsys.readouterr().out


def test_audit_reports_migration_leftovers(real_client, private_placement_url, capsys):
    host = small_host(real_client)
    _, model = start(real_client)
    server = model.boot(FLAVOR1)
    mig = model.resize(server.uuid, {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 1028},
                       allow_same_host=True)
    assert mig.dest == host
    assert cli.main(["audit", "--placement-url", private_placement_url]) == 0
    assert "0 provider problems, 0 migration allocations" in capsys.readouterr().out


def test_audit_bad_instances_file_names_entry(real_client, private_placement_url,
                                              tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"uuid": "x"}]))
    assert cli.main(["audit", "--placement-url", private_placement_url,
                     "--instances", str(path)]) == 2
    assert "instances[0]" in capsys.readouterr().err


def test_audit_placement_down_is_a_clear_error(capsys):
    assert cli.main(["audit", "--placement-url", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert "placement unreachable" in err
