"""The planners as commands, on a fake compute API (``ComputeEndpoint``):
``storage live-migration`` reads the server's disks, both reports and the
hosts' nova.conf; ``evacuate plan``/``run`` read the services, servers,
reports and the storage view, keep the planner's state in a file, and
evacuate through the API only in ``run``."""

import json

import pytest

from scheduler_ext.cmd import main as cli
from scheduler_ext.cmd import compute_access, placement_access
from scheduler_ext.placement.model import ConsumerAllocations, Inventory
from scheduler_ext.storage import (
    evacuation_disk, evacuation_run, livemigration_check)
from scheduler_ext.storage.errors import StorageError
from scheduler_ext.storage.fencing_policy import Policy
from scheduler_ext.storage.report import HostReport
from tests.unit.storage.reports import shared

GPFS = "gpfs:gpfs1:/pool/instances"


class FakeCompute:
    """Services, servers and volume attachments as nova's API shows them."""

    def __init__(self, services, servers, attachments=None):
        self.services = services
        self.servers = servers
        self.attachments = attachments or {}
        self.posts = []

    def get(self, path):
        if path.startswith("/os-hypervisors"):
            return self.hypervisors
        if path.startswith("/os-services"):
            return {"services": self.services}
        if path.startswith("/servers/detail"):
            host = path.rsplit("host=", 1)[1]
            return {"servers": [s for s in self.servers.values()
                                if s["OS-EXT-SRV-ATTR:host"] == host]}
        sid = path.split("/")[2]
        if path.endswith("/os-volume_attachments"):
            return {"volumeAttachments": self.attachments.get(sid, [])}
        return {"server": self.servers[sid]}

    def post(self, path, body):
        self.posts.append((path, body))


def service(host, state="up", forced=False):
    return {"id": f"id-{host}", "host": host, "state": state,
            "status": "enabled", "forced_down": forced}


def srv(sid, host, image="img", config_drive="", ephemeral=0, swap=0):
    return {"id": sid, "OS-EXT-SRV-ATTR:host": host, "image": image,
            "config_drive": config_drive,
            "flavor": {"disk": 10, "ephemeral": ephemeral, "swap": swap}}


REPORTS = {"cn1": shared("cn1", seen=["cn1"]),
           "cn2": shared("cn2", seen=["cn1", "cn2"]),
           "cn3": HostReport("cn3", "/var/lib/nova/instances", "local"),
           "cn4": shared("cn4", seen=["cn1", "cn2", "cn4"])}


def report_files(folder):
    """Each of ``REPORTS`` written as ``<host>.json`` in ``folder``; their
    paths."""
    files = []
    for report in REPORTS.values():
        path = folder / f"{report.host}.json"
        path.write_text(report.to_json())
        files.append(str(path))
    return files


# ---------------------------------------------------------- live migration
def test_compute_conf_reads_the_options_nova_uses():
    conf = livemigration_check.compute_conf(
        "[DEFAULT]\nuse_cow_images = false\nconfig_drive_format = vfat\n"
        "[libvirt]\nlive_migration_tunnelled = True\n")
    assert conf == livemigration_check.ComputeConf("raw", True, "vfat")
    assert livemigration_check.compute_conf("[libvirt]\nimages_type = rbd\n") \
        .images_type == "rbd"
    with pytest.raises(StorageError, match="nova-x.conf: \\[libvirt\\] "
                                           "images_type 'ploop'"):
        livemigration_check.compute_conf("[libvirt]\nimages_type = ploop\n",
                                         "nova-x.conf")


def test_the_seeds_server_volume_backed_with_a_vfat_config_drive():
    api = FakeCompute([], {"s": srv("s", "cn1", image="", config_drive="True")},
                      {"s": [{"volumeId": "root"}, {"volumeId": "data"}]})
    vfat = livemigration_check.ComputeConf(config_drive_format="vfat")
    check = livemigration_check.check(api, "s", "cn3", REPORTS, source_conf=vfat,
                                      libvirt_version=(1, 2, 16))
    assert (check.disks.volume_backed, check.disks.volumes,
            check.disks.config_drive) == (True, 1, "vfat")
    assert check.decision.error == "MigrationPreCheckError"
    assert "requires libvirt version 1.2.17" in check.decision.reason


def test_live_migration_command_prints_the_decision_and_hazards(
        tmp_path, capsys, monkeypatch):
    api = FakeCompute([], {"s": srv("s", "cn1", ephemeral=1)})
    monkeypatch.setattr(compute_access, "endpoint", lambda args: api)
    files = report_files(tmp_path)
    tunnel = tmp_path / "nova.conf"
    tunnel.write_text("[libvirt]\nlive_migration_tunnelled = true\n")
    code = cli.main(["storage", "live-migration", "s", "cn3", "--reports",
                     *files, "--compute-url", "http://unused",
                     "--source-conf", str(tunnel), "-f", "json"])
    shown = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (shown["source"], shown["destination"]) == ("cn1", "cn3")
    assert shown["nova does"] == "block: nothing"
    assert shown["nova source"] == "_live_migration_operation, Guest.migrate"
    assert shown["hazards"].startswith(
        "tunnelled-block-migration-copies-nothing: ")
    code = cli.main(["storage", "live-migration", "s", "cn2", "--reports",
                     *files, "--compute-url", "http://unused",
                     "--block-migration", "true", "-f", "json"])
    shown = json.loads(capsys.readouterr().out)
    assert code == 1 and shown["nova does"] == "InvalidLocalStorage"


def test_a_host_without_a_report_is_named():
    api = FakeCompute([], {"s": srv("s", "cn1")})
    with pytest.raises(StorageError, match="no storage report for host cn9"):
        livemigration_check.check(api, "s", "cn9", REPORTS)


# --------------------------------------------------------------- evacuation
def fleet(forced=()):
    services = [service(h, "down" if h in forced else "up", h in forced)
                for h in ("cn1", "cn2", "cn3", "cn4")]
    servers = {f"vm{i}": srv(f"vm{i}", "cn1") for i in range(2)}
    servers["vol"] = srv("vol", "cn1", image="")
    servers["busy"] = srv("busy", "cn4")
    return FakeCompute(services, servers)


def test_a_forced_down_host_is_evacuated_within_its_domain():
    api = fleet(forced={"cn1"})
    tick = evacuation_run.tick(api, REPORTS, Policy(), 100.0)
    moves = {a.instance: a.destination for a in tick.actions
             if a.kind == "evacuate"}
    # shared disks stay in the GPFS domain (cn2, cn4: cn4 holds "busy"),
    # least loaded then by name; the volume-backed one may go anywhere but
    # its own cluster comes first (cn3 is local storage): cn4, now the
    # least loaded there
    assert moves == {"vm0": "cn2", "vm1": "cn2", "vol": "cn4"}
    assert tick.notes and "no storage view given" in tick.notes[0]
    assert api.posts == []                       # a tick only reads
    assert evacuation_run.execute(api, tick) == []
    assert sorted(p for p, _ in api.posts) == [
        "/servers/vm0/action", "/servers/vm1/action", "/servers/vol/action"]


def test_storage_view_parse_and_bad_input():
    view = evacuation_run.storage_view('{"quorum": ["cn1"], "down": ["cn2"]}')
    assert view == evacuation_run.StorageView(frozenset({"cn1"}),
                                              frozenset({"cn2"}))
    with pytest.raises(StorageError, match="v.json: expected"):
        evacuation_run.storage_view('{"down": "cn2"}', "v.json")
    with pytest.raises(StorageError, match="nova does not know: cn9"):
        evacuation_run.tick(fleet(), REPORTS, Policy(), 0.0,
                            view=evacuation_run.StorageView(down=frozenset({"cn9"})))


def test_evacuate_plan_writes_nothing_and_run_keeps_its_state(
        tmp_path, capsys, monkeypatch):
    api = fleet()
    monkeypatch.setattr(compute_access, "endpoint", lambda args: api)
    files = report_files(tmp_path)
    state = tmp_path / "state.json"
    view = tmp_path / "view.json"
    view.write_text(json.dumps({"quorum": ["cn1", "cn2", "cn4"], "down": []}))
    argv = ["--reports", *files, "--state", str(state), "--storage-view",
            str(view), "--compute-url", "http://unused", "-f", "value"]
    assert cli.main(["evacuate", "plan", *argv]) == 0
    assert "nothing to do" in capsys.readouterr().err
    api.services[0].update(state="down")          # cn1's heartbeat is lost
    assert cli.main(["evacuate", "run", *argv, "--fence-command",
                     "echo done {step} on {host}"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("restart-agent cn1 suspect since")
    assert "fence: restart-agent cn1: echo exited 0: done restart-agent on " \
        "cn1" in err
    saved = json.loads(state.read_text())
    assert list(saved["suspects"]) == ["cn1"]
    api.services[0].update(forced_down=True)      # the operator fenced it
    assert cli.main(["evacuate", "plan", *argv]) == 0
    out = capsys.readouterr().out
    assert "would evacuate cn1 vm0 to cn2" in out and api.posts == []
    assert json.loads(state.read_text()) == saved  # plan wrote nothing
    assert cli.main(["evacuate", "run", *argv]) == 0
    assert "evacuate cn1 vm0 to cn2" in capsys.readouterr().out
    assert len(api.posts) == 3
    # with cn2 out of the storage quorum: 1 of 3 up, nothing moves
    view.write_text(json.dumps({"quorum": ["cn1", "cn2", "cn4"],
                                "down": ["cn2"]}))
    state.unlink()
    api.posts.clear()
    assert cli.main(["evacuate", "run", *argv]) == 1
    assert "alert" in capsys.readouterr().out and api.posts == []


def test_evacuate_bad_input_is_one_line(tmp_path, capsys):
    report = tmp_path / "cn1.json"
    report.write_text(REPORTS["cn1"].to_json())
    state = tmp_path / "state.json"
    state.write_text("[1, 2]")
    code = cli.main(["evacuate", "plan", "--reports", str(report), "--state",
                     str(state), "--compute-url", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"--state {state}: not a planner state" in err


# ------------------------------------------------- evacuation outcomes
class AsyncCompute(FakeCompute):
    """Nova's evacuate as it behaves: a POST is refused (HTTP 409, say) or
    accepted; an accepted one ends later with the server on its new host,
    or still on its source in ERROR (NoValidHost). ``outcomes[server]``:
    one per attempt, ``refuse``, ``no-valid-host``, ``busy`` or ``ok``
    (onto the named host, or ``cn4`` when nova's scheduler chooses)."""

    def __init__(self, services, servers, outcomes):
        super().__init__(services, servers)
        self.outcomes = {s: list(o) for s, o in outcomes.items()}

    def post(self, path, body):
        super().post(path, body)
        sid = path.split("/")[2]
        outcome = self.outcomes.get(sid, ["ok"]).pop(0) \
            if self.outcomes.get(sid) else "ok"
        server = self.servers[sid]
        if outcome == "refuse":
            raise StorageError(f"compute API POST {path}: HTTP 409: "
                               "Cannot 'evacuate' instance while it is in "
                               "task_state rebuilding")
        if outcome == "no-valid-host":
            server.update(status="ERROR")
        elif outcome == "busy":
            server["OS-EXT-STS:task_state"] = "rebuilding"
        else:
            server.update({"OS-EXT-SRV-ATTR:host":
                           body["evacuate"].get("host", "cn4"),
                           "status": "ACTIVE"})


def async_fleet(outcomes):
    api = fleet(forced={"cn1"})
    return AsyncCompute(api.services, api.servers, outcomes)


def run_ticks(api, policy, ticks, state=None):
    """``ticks`` runs of tick + execute, the state through JSON between
    them as the command keeps it; each tick's (kind, server, destination)."""
    seen = []
    for n in range(ticks):
        tick = evacuation_run.tick(api, REPORTS, policy, 100.0 * (n + 1), state)
        evacuation_run.execute(api, tick)
        state = json.loads(json.dumps(tick.state))
        seen.append([(a.kind, a.instance, a.destination) for a in tick.actions
                     if a.instance])
    return seen, state


def test_a_failed_evacuation_is_retried_elsewhere_then_given_up():
    api = async_fleet({"vm0": ["refuse", "ok"],
                       "vm1": ["no-valid-host", "no-valid-host"]})
    seen, state = run_ticks(api, Policy(evacuation_attempts=2), 4)
    assert seen[0] == [
        ("evacuate", "vm0", "cn2"), ("evacuate", "vm1", "cn2"),
        ("evacuate", "vol", "cn4"),
        # nova refused vm0: the tick still evacuated vm1 and vol
        ("evacuation-failed", "vm0", "cn2")]
    assert seen[1] == [
        # vm1's 202 ended in ERROR on its fenced source: a failure
        ("evacuation-failed", "vm1", "cn2"), ("log", "vol", None),
        # both retried on the host not tried yet (cn4), vm1 first
        ("evacuate", "vm1", "cn4"), ("evacuate", "vm0", "cn4")]
    assert seen[2] == [("log", "vm0", None), ("alert", "vm1", "cn4")]
    assert seen[3] == []                  # alerted once, left alone
    assert [p for p, _ in api.posts] == [
        "/servers/vm0/action", "/servers/vm1/action", "/servers/vol/action",
        "/servers/vm1/action", "/servers/vm0/action"]
    assert state["evacuations"]["vm1"]["state"] == "given-up"
    assert state["evacuations"]["vm1"]["tried"] == ["cn2", "cn4"]
    assert set(state["evacuations"]) == {"vm1"}
    assert api.servers["vm0"]["OS-EXT-SRV-ATTR:host"] == "cn4"


def test_an_evacuation_in_progress_is_not_retried():
    api = async_fleet({"vm0": ["busy"]})
    seen, state = run_ticks(api, Policy(), 3)
    assert ("evacuate", "vm0", "cn2") in seen[0]
    assert [k for k, s, _ in seen[1] + seen[2] if s == "vm0"] == []
    assert state["evacuations"]["vm0"]["state"] == "in-flight"
    api.servers["vm0"].update({"OS-EXT-STS:task_state": None,
                               "OS-EXT-SRV-ATTR:host": "cn2"})
    seen, state = run_ticks(api, Policy(), 1, state)
    assert seen == [[("log", "vm0", None)]] and state["evacuations"] == {}


def test_the_alert_names_every_host_tried():
    api = async_fleet({"vm0": ["no-valid-host"] * 3})
    seen, state = run_ticks(api, Policy(), 5)
    alerts = [s for tick in seen for s in tick if s[0] == "alert"]
    assert alerts == [("alert", "vm0", "cn2")]   # cn2, cn4, then cn2 again
    assert state["evacuations"]["vm0"]["tried"] == ["cn2", "cn4", "cn2"]


def test_evacuate_run_says_what_failed_and_exits_1(tmp_path, capsys,
                                                   monkeypatch):
    api = async_fleet({"vm0": ["refuse"]})
    monkeypatch.setattr(compute_access, "endpoint", lambda args: api)
    files = report_files(tmp_path)
    state = tmp_path / "state.json"
    argv = ["evacuate", "run", "--reports", *files, "--state", str(state),
            "--compute-url", "http://unused", "-f", "value"]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out.splitlines()
    assert "evacuate cn1 vol to cn4" in out       # not stopped by vm0
    assert any(line.startswith("evacuation-failed cn1 server vm0: attempt 1 "
                               "of 3 to cn2: nova refused: compute API POST")
               for line in out)
    assert cli.main(argv) == 0                    # the retry goes through
    out = capsys.readouterr().out
    assert "evacuate cn1 vm0 to cn4 (retry, attempt 2 of 3)" in out
    assert api.servers["vm0"]["OS-EXT-SRV-ATTR:host"] == "cn4"


# ------------------------------- a disk on a sharing provider, named hosts
class Disks:
    """A ``DiskPlacement``: the servers whose DISK_GB a sharing provider
    holds, the hosts whose compute node offers DISK_GB."""

    def __init__(self, sharing, offering=()):
        self.sharing, self.offering = set(sharing), set(offering)

    def sharing_disk(self, server_ids):
        return self.sharing & set(server_ids)

    def nodes_offering_disk(self, hosts):
        self.asked = set(hosts)
        return self.offering & set(hosts)


def test_a_shared_disk_is_never_sent_to_a_node_offering_no_disk_gb():
    # every compute node closed by migrate-disk: naming cn2 would be
    # NoValidHost (in_tree leaves the sharing provider out); nova's own
    # scheduler could pick cn3 (local storage, no disk of vm0's there)
    api = async_fleet({})
    tick = evacuation_run.tick(api, REPORTS, Policy(), 100.0,
                               disks=Disks({"vm0"}))
    evacuation_run.execute(api, tick)
    refusal = [a for a in tick.actions if a.instance == "vm0"]
    assert [(a.kind, a.destination) for a in refusal] == [("alert", "cn2")]
    assert refusal[0].reason.startswith(
        "server vm0 not evacuated to cn2: its DISK_GB is on a sharing "
        "provider and cn2's compute node offers no DISK_GB")
    assert "nova's scheduler could choose cn3, outside storage domain " \
        f"{GPFS}" in refusal[0].reason
    assert "openstack compute service set --disable HOST nova-compute" \
        in refusal[0].reason
    # the others of the tick go on; vm0 is not posted
    assert sorted(p for p, _ in api.posts) == ["/servers/vm1/action",
                                               "/servers/vol/action"]
    state = tick.state
    assert state["to_evacuate"]["cn1"] == ["vm0"]
    # alerted once: the next tick holds it silently
    again = evacuation_run.tick(api, REPORTS, Policy(), 200.0, state,
                                disks=Disks({"vm0"}))
    assert [a for a in again.actions if a.instance == "vm0"] == []
    # the operator disables cn3: every host nova can choose is in the
    # domain, so vm0 is evacuated without a host
    api.services[2].update(status="disabled")
    third = evacuation_run.tick(api, REPORTS, Policy(), 300.0, again.state,
                                disks=Disks({"vm0"}))
    moves = [a for a in third.actions if a.kind == "evacuate"]
    assert [(a.instance, a.destination) for a in moves] == [("vm0", None)]
    assert "nova's scheduler chooses" in moves[0].reason
    evacuation_run.execute(api, third)
    assert api.posts[-1] == ("/servers/vm0/action", {"evacuate": {}})
    assert third.state["refused"] == []


def test_a_shared_disk_goes_to_a_node_that_offers_disk_gb():
    api = async_fleet({})
    tick = evacuation_run.tick(api, REPORTS, Policy(), 100.0,
                               disks=Disks({"vm0", "vm1"}, offering={"cn4"}))
    moves = {a.instance: a.destination for a in tick.actions
             if a.kind == "evacuate"}
    # cn2 is less loaded but its node offers no DISK_GB; vol has no
    # sharing disk and goes to the least loaded
    assert moves == {"vm0": "cn4", "vm1": "cn4", "vol": "cn2"}


def test_only_the_nodes_of_a_shared_disk_servers_domain_are_read():
    """A node's DISK_GB inventory is read only for hosts of the storage
    domain of a fenced server holding its disk on a sharing provider (one
    GET per host of the fleet before: 100,000 at 100,000 hosts)."""
    disks = Disks({"vm0"}, offering={"cn4"})
    evacuation_run.tick(async_fleet({}), REPORTS, Policy(), 100.0, disks=disks)
    assert disks.asked == {"cn1", "cn2", "cn4"}    # not cn3: local storage


def test_volume_backed_server_with_disk_gb_on_a_sharing_provider_keeps_its_domain():
    """A volume-backed server (no image) whose ephemeral or swap DISK_GB is
    on the sharing provider has disks in its host's storage domain: it is
    sent to a node of that domain offering DISK_GB, and when none does,
    the refusal names the domain (it said "domain None" before)."""
    api = async_fleet({})
    tick = evacuation_run.tick(api, REPORTS, Policy(), 100.0,
                               disks=Disks({"vol"}, offering={"cn4"}))
    moves = {a.instance: a.destination for a in tick.actions
             if a.kind == "evacuate"}
    assert moves["vol"] == "cn4"
    refused = evacuation_run.tick(async_fleet({}), REPORTS, Policy(), 100.0,
                                  disks=Disks({"vol"}))
    alert = [a for a in refused.actions if a.instance == "vol"]
    assert [(a.kind, a.destination) for a in alert] == [("alert", "cn4")]
    assert f"outside storage domain {GPFS}" in alert[0].reason
    assert "domain None" not in alert[0].reason


class FakePlacement:
    def __init__(self, allocations, traits, inventories):
        self.allocations, self.traits = allocations, traits
        self.inventories = inventories

    def get_consumer(self, uuid):
        return ConsumerAllocations(self.allocations.get(uuid, {}), 1)

    def get_traits(self, rp):
        return 0, frozenset(self.traits.get(rp, ()))

    def get_inventories(self, rp):
        return 0, self.inventories.get(rp, {})


def test_placement_disk_reads_allocations_traits_and_inventories():
    client = FakePlacement(
        {"vm0": {"shared": {"DISK_GB": 10}, "n1": {"VCPU": 1}},
         "vm1": {"n1": {"DISK_GB": 10, "VCPU": 1}}},
        {"shared": ["MISC_SHARES_VIA_AGGREGATE"]},
        {"n1": {"DISK_GB": Inventory(1000)},
         "n2": {"DISK_GB": Inventory(1000, allocation_ratio=1e-9)}})
    api = FakeCompute([], {})
    api.hypervisors = {"hypervisors": [
        {"id": "n1", "service": {"host": "cn1"}},
        {"id": "n2", "service": {"host": "cn2"}}]}
    disks = evacuation_disk.PlacementDisk(client, api)
    assert disks.sharing_disk(["vm0", "vm1", "gone"]) == {"vm0"}
    # cn2's node was closed by migrate-disk (capacity under 1 GiB)
    assert disks.nodes_offering_disk(["cn1", "cn2", "cn3"]) == {"cn1"}


def test_evacuate_run_with_placement_refuses_and_says_why(
        tmp_path, capsys, monkeypatch):
    api = async_fleet({})
    api.hypervisors = {"hypervisors": [
        {"id": f"n{h[-1]}", "service": {"host": h}}
        for h in ("cn1", "cn2", "cn3", "cn4")]}
    placement = FakePlacement({"vm0": {"shared": {"DISK_GB": 10}}},
                              {"shared": ["MISC_SHARES_VIA_AGGREGATE"]}, {})
    monkeypatch.setattr(compute_access, "endpoint", lambda args: api)
    monkeypatch.setattr(placement_access, "client", lambda args: placement)
    files = report_files(tmp_path)
    argv = ["evacuate", "run", "--reports", *files, "--state",
            str(tmp_path / "state.json"), "--compute-url", "http://unused",
            "--placement-url", "http://unused", "-f", "value"]
    assert cli.main(argv) == 1
    out, err = capsys.readouterr()
    assert "alert cn1 server vm0 not evacuated to cn2" in out
    assert "no placement access" not in err
    assert [p for p, _ in api.posts] == ["/servers/vm1/action",
                                         "/servers/vol/action"]
