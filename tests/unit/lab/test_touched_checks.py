"""The touched-set invariant check catches every break the full check
catches, at the step that made it.

A small random run is driven step by step; at a chosen step, besides the
step's own operation, the allocations of a server the step acted on are
damaged in one of the ways the full check knows (through the placement's
own API, or by a placement that misreports usage). The touched-set check of
that step must report it, with the same kind of message the full check
gives. A clean run reports nothing from either."""

import pytest

from scheduler_ext.lab import invariants, simulation
from scheduler_ext.placement import AllocationWrite, allocations
from scheduler_ext.placement.embedded import EmbeddedPlacement


class LyingPlacement(EmbeddedPlacement):
    """Reports one provider's usage one unit too high (a placement whose
    usage no longer equals the sum of its allocations)."""

    lie: str | None = None

    def get_usages(self, rp_uuid):
        usages = super().get_usages(rp_uuid)
        if rp_uuid == self.lie:
            rc = sorted(usages)[0]
            usages[rc] += 1
        return usages


def _run(client=None):
    sim = simulation.RandomRun(4, 1, seed=5, client=client, full_check_every=0)
    sim.fill()
    sim.use_strategy("same_host")
    sim.start()
    return sim


def _write(sim, consumer, allocs, ctype="INSTANCE"):
    held = sim.client.get_consumer(consumer)
    sim.client.post_allocations({consumer: AllocationWrite(
        allocs, "project", "user", held.generation, ctype)})


def _a_server(sim, moving=False):
    """A server of the seeded run (with a move in progress or not): the
    run is fixed, so one that lacks it is a broken run, not a skip."""
    found = [u for u, s in sorted(sim.model.servers.items())
             if bool(s.active) == moving]
    assert found, f"the seeded run has no server {'moving' if moving else 'at rest'}"
    return found[0]


def _drop_class(sim, uuid):
    held = allocations.copy(sim.client.get_consumer(uuid).allocations)
    rp = sorted(held)[0]
    held[rp].pop(sorted(held[rp])[0])
    _write(sim, uuid, {r: v for r, v in held.items() if v})


def _grow(sim, uuid):
    held = allocations.copy(sim.client.get_consumer(uuid).allocations)
    rp = sorted(held)[0]
    rc = "MEMORY_MB" if "MEMORY_MB" in held[rp] else sorted(held[rp])[0]
    held[rp][rc] += 1
    _write(sim, uuid, held)


def _leftover(sim, uuid):
    """A finished move's migration holding allocations again (one vCPU:
    the fleet's hosts are full by memory, VCPU has room)."""
    server = sim.model.servers[uuid]
    sim.model.resize(uuid, server.flavor, allow_same_host=True)
    sim.model.confirm(uuid)
    mig = server.moves[-1].migration_uuid
    _write(sim, mig, {server.host: {"VCPU": 1}}, "MIGRATION")


def _unknown(sim, uuid):
    held = allocations.copy(sim.client.get_consumer(uuid).allocations)
    _write(sim, uuid, {})
    _write(sim, "0a0a0a0a-0000-4000-8000-000000000001", held)


def _over_capacity(sim, uuid):
    """An inventory lowered below what is used (placement accepts it)."""
    host = sim.model.servers[uuid].host
    gen, invs = sim.client.get_inventories(host)
    used = sim.client.get_usages(host)["MEMORY_MB"]
    inv = invs["MEMORY_MB"]
    invs["MEMORY_MB"] = type(inv)(used - 1 + inv.reserved, inv.reserved)
    sim.client.set_inventories(host, gen, invs)


DAMAGE = {
    # damage -> (what it does, the full check's words, exact run only)
    "lost class": (_drop_class, "holds", False),
    "more than the flavor": (_grow, "expected", True),
    "finished migration holds": (_leftover, "finished migration", True),
    "consumer of no server": (_unknown, "belongs to no server", False),
    "over capacity": (_over_capacity, "exceeds capacity", False),
}


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_touched_check_reports_damage_at_that_step(name):
    damage, words, exact = DAMAGE[name]
    sim = _run()
    for step in range(10):
        sim.step(step)
    assert sim.tally.violation_count == 0
    uuid = _a_server(sim)
    damage(sim, uuid)
    problems, _ = sim.checker.check([uuid], exact)
    assert any(words in p for p in problems), problems
    full = (invariants.check_providers(sim.client)
            + invariants.check_consumers(
                sim.client, sorted(sim.checker.held), sim.model.owner_of)
            + invariants.check_servers(sim.client, sim.model.states(), exact))
    assert any(words in p for p in full), full


def test_touched_check_reports_usage_not_equal_to_allocations():
    client = LyingPlacement()
    sim = _run(client)
    for step in range(5):
        sim.step(step)
    uuid = _a_server(sim)
    host = sim.model.servers[uuid].host
    client.lie = host
    _grow(sim, uuid)            # a write on that host: it is touched
    problems, _ = sim.checker.check([uuid], False)
    assert any("!= sum of allocations" in p and
               sim.checker.names[host] in p for p in problems), problems
    assert any("!= sum of allocations" in p
               for p in invariants.check_providers(client))


def test_a_clean_run_breaks_nothing_in_either_check():
    for strategy in ("same_host", "stock"):
        tally = simulation.run_random(strategy, hosts=6, sharing=2, steps=300,
                                      seed=9, full_check_every=50)
        assert tally.violation_count == 0, tally.violations
        assert tally.checks["touched"] == 300
        assert tally.checks["full"] == 1 + 6 + 1   # fill, every 50, end


def test_damage_in_a_run_is_reported_at_its_step():
    """Inside ``RandomRun.step``: a step whose write is wrong is named."""
    sim = _run()
    sim.step(0)
    uuid = _a_server(sim)
    original = sim.model.delete

    def delete_leaving_a_migration(server_uuid):
        _leftover(sim, server_uuid)
        return original(server_uuid)
    sim.model.delete = delete_leaving_a_migration
    for step in range(1, 200):
        sim.step(step)
        if sim.tally.violation_count:
            break
    assert sim.tally.violation_count
    first = sim.tally.violations[0]
    assert first.startswith(f"after step {step} (delete)") and \
        "belongs to no server" in first, first
    del uuid


class CountingPlacement(EmbeddedPlacement):
    """Counts the consumers read."""

    def __init__(self):
        super().__init__()
        self.reads = []

    def get_consumer(self, consumer_uuid):
        self.reads.append(consumer_uuid)
        return super().get_consumer(consumer_uuid)


def test_check_servers_reads_finished_moves_only_when_exact():
    """A server keeps every move it had; only the exact check looks at the
    finished ones (the others read the instance and the move in progress)."""
    client = CountingPlacement()
    sim = _run(client)
    uuid = _a_server(sim)
    server = sim.model.servers[uuid]
    for _ in range(3):
        sim.model.resize(uuid, server.flavor, allow_same_host=True)
        sim.model.confirm(uuid)
    sim.model.resize(uuid, server.flavor, allow_same_host=True)
    state = sim.model.state_of(uuid)
    migrations = [m.migration_uuid for m in state.moves]
    assert len(migrations) == 4
    for exact, wanted in ((False, [uuid, migrations[-1]]),
                          (True, [uuid] + migrations)):
        client.reads.clear()
        assert invariants.check_servers(client, [state], exact) == []
        assert client.reads == wanted
    sim.model.confirm(uuid)
    client.reads.clear()
    assert invariants.check_servers(client, [sim.model.state_of(uuid)], False) == []
    assert client.reads == [uuid]
