"""``simulate --scenario`` with the storage layout taken from the hosts' own
``storage discover`` reports (issue 12): the sharing providers come from
the reports, servers' DISK_GB lands on their domain's provider, and bad
reports are refused by file and line."""

import json

from scheduler_ext.cmd import main as cli
from scheduler_ext.lab import scenario_file
from scheduler_ext.lab.scenario_run import ScenarioRun
from scheduler_ext.placement import SHARING_TRAIT
from tests.unit.storage import reports

SCENARIO = """\
flavors:
  small: {VCPU: 1, MEMORY_MB: 1024, DISK_GB: 100}
  large: {VCPU: 2, MEMORY_MB: 2048, DISK_GB: 300}
hosts:
  - name: cn
    count: 3
    inventory:
      VCPU: {total: 8}
      MEMORY_MB: {total: 16384}
storage_reports: [cn-0.json, cn-1.json, cn-2.json]
servers:
  - {name: web, flavor: small, host: cn-0}
  - {name: db, flavor: small, host: cn-2}
events:
  - {op: resize, server: web, flavor: large}
  - {op: confirm, server: web}
  - {op: migrate, server: db}
  - {op: reconcile}
"""


def _write(tmp_path, text=SCENARIO, hosts=("cn-0", "cn-1", "cn-2")):
    gpfs, nfs = reports.GPFS, reports.NFS
    layout = [reports.shared(hosts[0], seen=[hosts[0]]),
              reports.shared(hosts[1], seen=[hosts[0], hosts[1]]),
              reports.shared(hosts[2], nfs, reports.T2, total_gib=500,
                             free_gib=400, available_gib=400)]
    assert layout[0].domain == gpfs
    for i, rep in enumerate(layout):
        (tmp_path / f"cn-{i}.json").write_text(rep.to_json())
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


def test_reports_become_sharing_providers_and_hold_the_disks(tmp_path):
    path = _write(tmp_path)
    scenario = scenario_file.load(path.read_text(), str(path))
    run = ScenarioRun(scenario)
    client = run.client
    sharing = [p for p in client.list_providers()
               if SHARING_TRAIT in client.get_traits(p.uuid)[1]]
    assert len(sharing) == 2
    by_name = {p.name: p.uuid for p in client.list_providers()}
    gpfs_aggs = client.get_aggregates(by_name["cn-0"])[1]
    assert gpfs_aggs == client.get_aggregates(by_name["cn-1"])[1]
    assert gpfs_aggs != client.get_aggregates(by_name["cn-2"])[1]
    web = client.get_consumer(run.servers["web"]).allocations
    db = client.get_consumer(run.servers["db"]).allocations
    disk_of = {rp for rp, res in web.items() if "DISK_GB" in res}
    assert disk_of and disk_of.isdisjoint({by_name["cn-0"]})
    assert disk_of != {rp for rp, res in db.items() if "DISK_GB" in res}


def test_scenario_with_reports_replays_without_violations(tmp_path, capsys):
    path = _write(tmp_path)
    out = tmp_path / "run.json"
    assert cli.main(["simulate", "--scenario", str(path), "--json", str(out)]) == 0
    runs = json.loads(out.read_text())["scenarios"]["file"]
    for strategy in ("stock", "same_host"):
        assert runs[strategy]["invariant_violations"] == 0
    assert runs["same_host"]["operations"]["resize"] == {"succeeded": 1,
                                                         "attempted": 1}


def test_report_of_an_unknown_host_is_refused_by_line(tmp_path, capsys):
    path = _write(tmp_path, hosts=("cn-0", "cn-1", "elsewhere"))
    assert cli.main(["simulate", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "line 10" in err[0] and "elsewhere" in err[0]


def test_contradictory_reports_are_refused(tmp_path, capsys):
    path = _write(tmp_path)
    rep = json.loads((tmp_path / "cn-1.json").read_text())
    rep["total_bytes"] *= 3          # the same domain, another size
    (tmp_path / "cn-1.json").write_text(json.dumps(rep))
    assert cli.main(["simulate", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err
    assert "storage_reports" in err and "Traceback" not in err
