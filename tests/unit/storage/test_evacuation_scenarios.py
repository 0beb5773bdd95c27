"""The evacuation planner's guarantees as scenarios, each with every action
expected tick by tick (5 s ticks; the simulated world of ``evacworld``
carries the actions out): recovery during a fence, a stuck fence, a 50%
split, 2 nodes, storage quorum lost, and a mass failure. Each also runs the
world's checks (no fence or evacuation that costs the storage its quorum,
none while it is lost, no evacuation from an unfenced host)."""

from scheduler_ext.storage.fencing_policy import Policy
from tests.unit.storage.evacworld import World, hci, servers

HARD = ("restart-agent", "graceful-reboot", "hard-reboot")


def trace(log):
    """(at, kind, host), or (at, "evacuate", instance, destination)."""
    return [(a.at, "evacuate", a.instance, a.destination) if a.kind == "evacuate"
            else (a.at, a.kind, a.host) for a in log]


def run(cluster, size, conditions, policy=Policy(), per_host=1, until=1500.0,
        **kw):
    hosts = hci(cluster, size)
    w = World(hosts, servers(hosts, per_host), policy, conditions)
    log = w.run(until, **kw)
    assert w.violations == []
    return log


def reason(log, at, host):
    return " | ".join(a.reason for a in log if a.at == at and a.host == host)


# ------------------------------------------------------ recovery during a fence
def test_reboot_confirmed_in_the_tick_the_heartbeat_returns_evacuates_nothing():
    log = run("a", 3, {"a-2": "quick-reboot"}, Policy(evacuation_batch=1),
              per_host=3)
    assert trace(log) == [
        (0, "restart-agent", "a-2"),
        (300, "graceful-reboot", "a-2"),
        (360, "log", "a-2"),
    ]
    assert reason(log, 360, "a-2") == (
        "heartbeat back; its graceful-reboot is abandoned; the fence "
        "confirmation of this tick is ignored")


def test_heartbeat_back_clears_the_evacuation_queue():
    log = run("a", 3, {"a-2": "partitioned"}, Policy(evacuation_batch=1),
              per_host=30, until=600)
    moved = [t for t in trace(log) if t[1] == "evacuate"]
    # one per tick from the confirmation (360) to the last tick before the
    # host is back (475); none after
    assert [t[0] for t in moved] == [360 + 5 * i for i in range(24)]
    assert trace(log)[-1] == (480, "log", "a-2")
    assert reason(log, 480, "a-2") == (
        "heartbeat back; 6 evacuation(s) dropped, those instances stay on it")


def test_heartbeat_back_while_a_fence_is_pending_is_never_fenced_again():
    log = run("b", 5, {"b-1": "hung"}, Policy(HARD), changes={400.0: {"b-1": "ok"}})
    assert trace(log) == [
        (0, "restart-agent", "b-1"),
        (300, "graceful-reboot", "b-1"),
        (400, "log", "b-1"),
    ]
    assert reason(log, 400, "b-1") == \
        "heartbeat back; its graceful-reboot is abandoned"


# ------------------------------------------------------------ a stuck fence
def test_a_stuck_fence_times_out_alerts_and_frees_its_batch_slot():
    log = run("b", 5, {"b-1": "hung"}, changes={400.0: {"b-4": "partitioned"}})
    assert trace(log) == [
        (0, "restart-agent", "b-1"),
        (300, "graceful-reboot", "b-1"),
        (400, "restart-agent", "b-4"),
        (700, "log", "b-4"),                # deferred: b-1's fence in flight
        (900, "alert", "b-1"),              # b-1's fence stuck for 600 s
        (900, "graceful-reboot", "b-4"),
        (960, "log", "b-4"),                # confirmed
        (960, "evacuate", "b-4-vm0", "b-2"),
        (1080, "log", "b-4"),               # back after its reboot
    ]
    assert reason(log, 700, "b-4") == \
        "graceful-reboot deferred: 1 fence(s) in flight (batch 1)"
    assert reason(log, 900, "b-1").startswith(
        "graceful-reboot issued at 300 not confirmed within 600 s: fence stuck")


def test_a_stuck_fence_confirmed_by_hand_is_then_evacuated():
    log = run("b", 5, {"b-1": "hung"}, confirm={1000.0: ["b-1"]})
    assert trace(log) == [
        (0, "restart-agent", "b-1"),
        (300, "graceful-reboot", "b-1"),
        (900, "alert", "b-1"),
        (1000, "log", "b-1"),
        (1000, "evacuate", "b-1-vm0", "b-2"),
    ]


def test_the_default_ladder_never_hard_reboots():
    assert "hard-reboot" not in Policy().ladder
    log = run("a", 3, {"a-2": "dead"}, until=3600)
    assert trace(log) == [
        (0, "restart-agent", "a-2"),
        (300, "graceful-reboot", "a-2"),
        (900, "alert", "a-2"),
    ]


# ------------------------------------------------------------ a 50% split
def test_a_two_two_split_is_braked():
    log = run("s", 4, {"s-1": "partitioned", "s-2": "partitioned"})
    assert trace(log) == [(0, "alert", "s")]
    assert reason(log, 0, "s").startswith(
        "storage incident: 2 of 4 hosts suspect (s-1, s-2), at least 50%")


def test_without_the_brake_suspects_do_not_count_toward_the_quorum():
    log = run("s", 4, {"s-1": "partitioned", "s-2": "partitioned"},
              Policy(brake_fraction=0.6))
    assert trace(log) == [
        (0, "restart-agent", "s-1"), (0, "restart-agent", "s-2"),
        (300, "log", "s-1"), (300, "log", "s-2"),
        (900, "alert", "s-1"), (900, "alert", "s-2"),
    ]
    assert "only 2 of 4 quorum members are healthy, below the majority 3" in \
        reason(log, 300, "s-1")


# ------------------------------------------------------------ two nodes
def test_two_nodes_one_suspect_alerts_at_once():
    log = run("t", 2, {"t-1": "partitioned"})
    assert trace(log) == [(0, "alert", "t")]


def test_two_nodes_without_the_brake_alert_instead_of_waiting_silently():
    log = run("t", 2, {"t-1": "partitioned"}, Policy(brake_fraction=0.6))
    assert trace(log) == [
        (0, "restart-agent", "t-1"),
        (300, "log", "t-1"),
        (900, "alert", "t-1"),
    ]
    assert "a 2-node cluster never has one after a fence" in reason(log, 900, "t-1")


# ---------------------------------------------------- storage quorum lost
def test_storage_quorum_lost_stops_evacuation_until_it_is_back():
    log = run("b", 5, {"b-1": "dead"}, Policy(HARD, evacuation_batch=1),
              per_host=4, until=900,
              changes={615.0: {"b-2": "storage-lost", "b-3": "storage-lost"},
                       700.0: {"b-2": "ok", "b-3": "ok"}})
    assert trace(log) == [
        (0, "restart-agent", "b-1"),
        (300, "graceful-reboot", "b-1"),
        (600, "hard-reboot", "b-1"),
        (605, "log", "b-1"),
        (605, "evacuate", "b-1-vm0", "b-2"),
        (610, "evacuate", "b-1-vm1", "b-3"),
        (615, "alert", "b"),
        (700, "log", "b"),
        (700, "evacuate", "b-1-vm2", "b-4"),
        (705, "evacuate", "b-1-vm3", "b-5"),
    ]
    assert reason(log, 615, "b").startswith(
        "storage quorum lost: 2 of 5 quorum members up, majority 3")


def test_storage_quorum_lost_stops_fencing_until_it_is_back():
    log = run("b", 5, {"b-1": "dead", "b-2": "storage-lost",
                       "b-3": "storage-lost"}, Policy(HARD), until=1800,
              changes={1200.0: {"b-2": "ok", "b-3": "ok"}})
    assert trace(log) == [
        (0, "alert", "b"),
        (1200, "log", "b"),
        (1200, "restart-agent", "b-1"),
        (1500, "graceful-reboot", "b-1"),
        (1800, "hard-reboot", "b-1"),
    ]


# ---------------------------------------------------------- mass failure
def test_mass_failure_alerts_and_acts_only_once_it_is_over():
    log = run("d", 7, {f"d-{i}": "dead" for i in range(1, 5)}, Policy(HARD),
              until=3000, changes={1800.0: {"d-2": "ok", "d-3": "ok", "d-4": "ok"}})
    assert trace(log) == [
        (0, "alert", "d"),                  # storage quorum lost (3 of 7)
        (0, "alert", "d"),                  # storage incident (4 of 7)
        (1800, "log", "d-2"), (1800, "log", "d-3"), (1800, "log", "d-4"),
        (1800, "log", "d"), (1800, "log", "d"),
        (1800, "restart-agent", "d-1"),
        (2100, "graceful-reboot", "d-1"),
        (2400, "hard-reboot", "d-1"),
        (2405, "log", "d-1"),
        (2405, "evacuate", "d-1-vm0", "d-2"),
    ]
    assert [a.reason for a in log if a.at == 1800 and a.host == "d"] == [
        "storage quorum back", "storage incident over"]
