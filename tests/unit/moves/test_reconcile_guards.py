"""Issue 33, finding 7: a reconcile write is guarded against the state it
was planned from. It carries the generation of every consumer read for
the plan (migrations included), and nova's state is checked again after
placement's read: a move that starts meanwhile makes the write fail, and
the instance is retried later, never "restored" beside the new migration.
``client`` is overridden by the functional twin of this module to run on a
real placement."""

import uuid

import pytest

from scheduler_ext.lab import invariants
from scheduler_ext.lab.fleet import add_host
from scheduler_ext.lab.nova_model import Server
from scheduler_ext.moves.reconcile import InstanceState, MoveState, Reconciler
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from tests.unit.helpers import start

OLD = {"VCPU": 1, "MEMORY_MB": 1024}
NEW = {"VCPU": 2, "MEMORY_MB": 1024}
MAX = {"VCPU": 2, "MEMORY_MB": 2048}


@pytest.fixture
def client():
    return EmbeddedPlacement()


class BeforeFirstRead:
    """Delegates to ``inner``; runs ``action`` once, just before the
    first read of ``consumer``'s allocations."""

    def __init__(self, inner, consumer, action):
        self.inner, self.consumer, self.action = inner, consumer, action

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def get_consumer(self, consumer):
        if consumer == self.consumer and self.action is not None:
            action, self.action = self.action, None
            action()
        return self.inner.get_consumer(consumer)


class BeforeWrite(BeforeFirstRead):
    """Runs ``action`` once, just before the first write."""

    def get_consumer(self, consumer):
        return self.inner.get_consumer(consumer)

    def post_allocations(self, writes):
        if self.action is not None:
            action, self.action = self.action, None
            action()
        return self.inner.post_allocations(writes)


def _hosts(client):
    invs = {"VCPU": Inventory(4), "MEMORY_MB": Inventory(8192)}
    return add_host(client, "host1", invs), add_host(client, "host2", invs)


def _reverted(client, model, host):
    """A server after a same-host revert: it holds max(old, new), the
    reconcile has a trim to make."""
    server = str(uuid.uuid4())
    client.put_allocations(server, AllocationWrite(
        {host: MAX}, model.project_id, model.user_id, None, "INSTANCE"))
    model.servers[server] = Server(server, dict(OLD), host)
    return server


def test_a_move_that_starts_while_the_reconcile_reads_placement_makes_it_retry(client):
    """nova's state is read (no move), then a resize to another host
    starts before placement is read: the conductor moved the allocations
    to a new migration and the instance claimed host2. Planned from the
    stale state, the fix would put the old flavor back on host1 beside the
    migration holding it. The check of nova's state after placement's read
    stops it: nothing written, the instance to retry."""
    host1, host2 = _hosts(client)
    _, model = start(client, "same_host", prefer_same_host=False)
    server = _reverted(client, model, host1)
    stale = model.state_of(server)
    racing = BeforeFirstRead(client, server, lambda: model.resize(
        server, NEW, allow_same_host=False))
    fix = Reconciler(racing).reconcile_one(
        stale, recheck=lambda s: model.state_of(s.uuid) == s)
    assert fix is not None and not fix.applied and "nova" in fix.error
    assert invariants.check_providers(client) == []
    move = model.servers[server].active
    assert client.get_consumer(server).allocations == {host2: NEW}
    assert client.get_consumer(move.migration_uuid).allocations == {host1: MAX}
    # the retry, with nova's state read again, trims the migration to the
    # old flavor (the trim the revert left) and leaves the claim on host2
    assert Reconciler(client).reconcile_one(model.state_of(server)).applied
    assert client.get_consumer(move.migration_uuid).allocations == {host1: OLD}
    assert client.get_consumer(server).allocations == {host2: NEW}


def test_a_reconcile_write_carries_the_generation_of_a_migration_it_only_read(client):
    """A move to another host in progress: the migration holds the old
    flavor on the source (right, not rewritten), the instance over-holds
    on the destination (the fix). The migration changes between the read
    and the write: the write, carrying the migration's generation, fails
    and writes nothing."""
    host1, host2 = _hosts(client)
    _, model = start(client)
    server, mig = str(uuid.uuid4()), str(uuid.uuid4())
    client.put_allocations(server, AllocationWrite(
        {host2: MAX}, model.project_id, model.user_id, None, "INSTANCE"))
    client.put_allocations(mig, AllocationWrite(
        {host1: OLD}, model.project_id, model.user_id, None, "MIGRATION"))
    state = InstanceState(server, host2, NEW, model.project_id, model.user_id,
                          (MoveState(mig, host1, host2, OLD, NEW, True),))

    def migration_written():
        held = client.get_consumer(mig)
        client.put_allocations(mig, held.write({host1: NEW}))

    fix = Reconciler(BeforeWrite(client, None, migration_written)).reconcile_one(state)
    assert fix is not None and not fix.applied and fix.error
    assert client.get_consumer(server).allocations == {host2: MAX}
    assert client.get_consumer(mig).allocations == {host1: NEW}
