"""Quorum-safe fencing and evacuation on a simulated clock: 3-, 5- and
7-node hyper-converged clusters, whole-cluster outages, the brake, the
ladder, and evacuation only after a confirmed fence."""

import pytest
from oslo_config import cfg

from scheduler_ext import conf as se_conf
from scheduler_ext.storage.evacuation import (
    ClusterHost, EvacuationPlanner, Instance, majority)
from scheduler_ext.storage.fencing_policy import Policy, policy_from_conf
from tests.unit.storage.evacworld import World, hci, kinds, servers

HOUR = 3600.0
HARD = Policy(ladder=("restart-agent", "graceful-reboot", "hard-reboot"))


def world(hosts, conditions, policy=None, per_host=2, instances=None):
    return World(hosts, instances if instances is not None else servers(hosts, per_host),
                 policy or Policy(), conditions)


def evacuations(log, host=None):
    return [a for a in log if a.kind == "evacuate" and (host is None or a.host == host)]


def fences(log):
    return [a for a in log if a.kind in ("graceful-reboot", "hard-reboot")]


def test_three_nodes_one_dead_host_climbs_the_ladder_then_is_evacuated():
    hosts = hci("a", 3)
    w = world(hosts, {"a-2": "dead"}, HARD)
    log = w.run(HOUR)
    assert w.violations == []
    assert kinds(log, "a-2") == ["restart-agent", "graceful-reboot", "hard-reboot",
                                 "log"]
    steps = {a.kind: a.at for a in log if a.host == "a-2"}
    assert (steps["restart-agent"], steps["graceful-reboot"],
            steps["hard-reboot"]) == (0, 300, 600)
    moved = evacuations(log, "a-2")
    assert [a.instance for a in moved] == ["a-2-vm0", "a-2-vm1"]
    assert all(a.at == 605 for a in moved)          # the tick the fence is confirmed
    assert {a.destination for a in moved} == {"a-1", "a-3"}   # least loaded first


def test_three_nodes_two_suspects_is_a_storage_incident_until_they_return():
    hosts = hci("a", 3)
    w = world(hosts, {"a-1": "hung", "a-3": "hung"})
    log = w.run(HOUR, changes={1800.0: {"a-1": "ok", "a-3": "ok"}})
    assert w.violations == []
    assert fences(log) == [] and evacuations(log) == []
    alerts = [a for a in log if a.kind == "alert"]
    assert len(alerts) == 1 and alerts[0].at == 0 and alerts[0].host == "a"
    assert "2 of 3 hosts suspect" in alerts[0].reason
    assert any(a.reason == "storage incident over" and a.at == 1800 for a in log)


def test_agent_restart_that_brings_the_heartbeat_back_fences_nothing():
    hosts = hci("a", 3)
    w = world(hosts, {"a-1": "agent-hung"})
    log = w.run(HOUR)
    assert kinds(log, "a-1") == ["restart-agent", "log"]
    assert fences(log) == [] and evacuations(log) == []


def test_five_nodes_two_partitioned_hosts_are_fenced_one_at_a_time():
    hosts = hci("b", 5)
    w = world(hosts, {"b-1": "partitioned", "b-4": "partitioned"})
    log = w.run(HOUR)
    assert w.violations == []
    graceful = [(a.at, a.host) for a in fences(log)]
    # b-4's fence waits until b-1's is confirmed (fence_batch 1)
    assert graceful == [(300, "b-1"), (360, "b-4")]
    assert any(a.host == "b-4" and "deferred" in a.reason for a in log)
    assert {a.host for a in evacuations(log)} == {"b-1", "b-4"}
    assert len(evacuations(log)) == 4


def test_five_nodes_a_fence_that_would_break_the_majority_is_not_issued():
    hosts = hci("b", 5)
    policy = Policy(brake_fraction=0.7, fence_batch=3)
    w = world(hosts, {"b-1": "dead", "b-2": "dead", "b-3": "partitioned"}, policy)
    log = w.run(HOUR)
    assert w.violations == []
    fenced = {a.host for a in fences(log)}
    assert "b-3" not in fenced and {"b-1", "b-2"} <= fenced
    deferred = [a for a in log if a.host == "b-3" and "deferred" in a.reason]
    assert "only 2 of 5 quorum members are healthy, below the majority 3" in \
        deferred[0].reason
    assert evacuations(log, "b-3") == []


@pytest.mark.parametrize("size", [3, 5, 7])
def test_whole_cluster_outage_alerts_and_never_fences_or_evacuates(size):
    hosts = hci("c", size)
    w = world(hosts, {h.name: "dead" for h in hosts})
    log = w.run(2 * HOUR)
    assert fences(log) == [] and evacuations(log) == []
    assert [(a.kind, a.host) for a in log] == [("alert", "c"), ("alert", "c")]
    assert log[0].reason.startswith(f"storage quorum lost: 0 of {size}")
    assert f"{size} of {size} hosts suspect" in log[1].reason


def test_seven_nodes_fence_three_at_once_while_four_healthy_keep_the_quorum():
    hosts = hci("d", 7)
    policy = Policy(HARD.ladder, brake_fraction=0.6, fence_batch=3)
    w = world(hosts, {"d-1": "dead", "d-2": "partitioned", "d-3": "partitioned"},
              policy)
    log = w.run(HOUR)
    assert w.violations == []
    assert majority(7) == 4
    assert {a.host for a in fences(log) if a.at == 300} == {"d-1", "d-2", "d-3"}
    assert len(evacuations(log)) == 6


def test_seven_nodes_suspects_do_not_count_toward_the_majority():
    """d-2..d-4 are still in the storage quorum, but only 3 hosts are
    healthy: fencing any of them could leave the storage without a majority
    whatever the others do, so none is fenced (d-1 is out of the quorum
    already and is)."""
    hosts = hci("d", 7)
    policy = Policy(brake_fraction=0.6, fence_batch=3)
    w = world(hosts, {"d-1": "dead", "d-2": "partitioned", "d-3": "partitioned",
                      "d-4": "partitioned"}, policy)
    log = w.run(HOUR)
    assert w.violations == []
    assert {a.host for a in fences(log)} == {"d-1"}
    for host in ("d-2", "d-3", "d-4"):
        deferred = [a for a in log if a.host == host and "deferred" in a.reason]
        assert "only 3 of 7 quorum members are healthy, below the majority 4" \
            in deferred[0].reason
        assert [a.at for a in deferred if a.kind == "alert"] == [900]


@pytest.mark.parametrize("size, suspects", [(3, 1), (5, 2), (7, 3)])
def test_hci_clusters_fence_up_to_the_brake_and_keep_the_majority(size, suspects):
    hosts = hci("e", size)
    w = world(hosts, {h.name: "partitioned" for h in hosts[:suspects]},
              Policy(fence_batch=size))
    log = w.run(HOUR)
    assert w.violations == []
    assert {a.host for a in evacuations(log)} == {h.name for h in hosts[:suspects]}
    one_more = world(hosts, {h.name: "partitioned" for h in hosts[:suspects + 1]},
                     Policy(fence_batch=size))
    assert fences(one_more.run(HOUR)) == []      # past the brake


def test_shared_disks_stay_in_their_domain_local_disks_go_anywhere():
    a, b = hci("a", 3), hci("b", 3)
    instances = [Instance("shared-vm", "a-1", "gpfs:a:/instances"),
                 Instance("local-vm", "a-1", None)]
    instances += [Instance(f"filler{i}", "a-2", "gpfs:a:/instances")
                  for i in range(3)]
    w = world(a + b, {"a-1": "dead"}, HARD, instances=instances)
    log = w.run(HOUR)
    assert w.violations == []
    dest = {e.instance: e.destination for e in evacuations(log)}
    assert dest["shared-vm"] == "a-3"          # a-2 is busier; never cluster b
    assert dest["local-vm"] == "a-3"


def test_no_destination_in_the_domain_is_an_alert_not_a_wrong_move():
    a = [ClusterHost("a-1", "a", True, frozenset(["d1"])),
         ClusterHost("a-2", "a", True, frozenset(["d1"]), capacity=0),
         ClusterHost("a-3", "a", True, frozenset(["d2"]))]
    w = world(a, {"a-1": "dead"}, HARD, instances=[Instance("vm", "a-1", "d1")])
    log = w.run(HOUR)
    assert evacuations(log) == []
    alerts = [e for e in log if e.kind == "alert"]
    assert len(alerts) == 1 and "in storage domain d1" in alerts[0].reason


def test_log_only_ladder_only_logs():
    hosts = hci("a", 3)
    w = world(hosts, {"a-2": "dead"}, Policy(ladder=("log-only",)))
    log = w.run(HOUR)
    assert [a.kind for a in log] == ["log"]


def test_an_exhausted_ladder_alerts_once_and_never_evacuates():
    hosts = hci("a", 3)
    w = world(hosts, {"a-2": "dead"},
              Policy(ladder=("restart-agent", "graceful-reboot")))
    log = w.run(HOUR)
    assert kinds(log, "a-2") == ["restart-agent", "graceful-reboot", "alert"]
    assert evacuations(log) == []


def test_the_same_inputs_give_the_same_actions():
    def once():
        hosts = hci("d", 7)
        return world(hosts, {"d-1": "dead", "d-5": "partitioned"},
                     Policy(fence_batch=2)).run(HOUR)
    assert once() == once()


@pytest.mark.parametrize("kwargs, match", [
    ({"ladder": ()}, "steps are"),
    ({"ladder": ("reboot",)}, "steps are"),
    ({"ladder": ("log-only", "hard-reboot")}, "ladder of its own"),
    ({"ladder": ("hard-reboot", "restart-agent")}, "must climb"),
    ({"brake_fraction": 0}, "brake_fraction"),
    ({"fence_batch": 0}, "batches"),
])
def test_bad_policies_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Policy(**kwargs)


def test_unknown_hosts_are_refused():
    with pytest.raises(ValueError, match="instances on unknown hosts: x"):
        EvacuationPlanner(hci("a", 3), [Instance("vm", "x")])
    planner = EvacuationPlanner(hci("a", 3), [])
    with pytest.raises(ValueError, match="unknown hosts: nope"):
        planner.tick(0, ["nope"])


def test_policy_from_the_storage_options():
    conf = cfg.ConfigOpts()
    se_conf.register_opts(conf)
    conf([], project="scheduler-ext", default_config_files=[])
    assert policy_from_conf(conf) == Policy()
    conf.set_override("fence_ladder", ["log-only"], group="storage")
    conf.set_override("brake_fraction", 0.34, group="storage")
    assert policy_from_conf(conf) == Policy(ladder=("log-only",),
                                            brake_fraction=0.34)
