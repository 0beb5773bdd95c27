"""Fault injection at every placement write of a move-heavy scenario.

Each write fails once in each of three ways: placement unreachable before
the write (nothing written), the process dies right after the write
(written, the caller never learns), and a 409 conflict. After the fault the
caller stops (as a dead process would); placement must be exactly as before
that write or as after it, never overcommitted, and one reconcile must bring
every server back to the invariants.
"""

import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.lab import invariants
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.moves.reconcile import Reconciler
from tests.unit.helpers import dump, shared_storage, small_host, start

AGG = str(uuid.UUID(int=9))
WRITES = ("put_allocations", "post_allocations", "delete_allocations")


class Injected(Exception):
    """Stands for the process dying: nothing catches it."""


class FaultyPlacement:
    """Delegates to ``inner``; the ``fail_at``-th allocation write fails."""

    def __init__(self, inner, fail_at: int | None = None, mode: str = "before"):
        self.inner, self.fail_at, self.mode = inner, fail_at, mode
        self.writes = 0
        self.before = self.after = None

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name not in WRITES:
            return attr

        def write(*args, **kwargs):
            self.writes += 1
            if self.writes != self.fail_at:
                return attr(*args, **kwargs)
            self.before = dump(self.inner)
            if self.mode == "before":
                raise errors.PlacementUnavailable(f"injected: {name} unreachable")
            if self.mode == "conflict":
                raise errors.ConcurrentUpdate(f"injected: {name} conflict")
            attr(*args, **kwargs)
            self.after = dump(self.inner)
            raise Injected(f"process died after {name}")
        return write


def scenario(client):
    """Boots, same-host resize, other-host migration, a failure with
    reschedule, confirm, revert and delete, with shared storage."""
    small_host(client, "host1", disk=False, aggregates=[AGG])
    small_host(client, "host2", disk=False, aggregates=[AGG])
    shared_storage(client, AGG, disk_gb=4000)
    _, model = start(client, prefer_same_host=True)
    one, two = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))

    def moving(uuid_, action):
        # a step that needs a move in progress is skipped when an earlier
        # fault changed the course of events
        def step():
            server = model.servers.get(uuid_)
            if server is not None and server.active:
                return action(uuid_)
        return step

    steps = [
        lambda: model.boot({"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 100}, one),
        lambda: model.boot({"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 100}, two),
        lambda: model.resize(one, {"VCPU": 1, "MEMORY_MB": 4096, "DISK_GB": 200}),
        lambda: model.migrate(two),
        moving(one, model.fail_on_destination),
        moving(two, model.confirm),
        moving(one, model.revert),
        lambda: model.delete(two),
    ]
    return model, steps


def _count_writes():
    client = FaultyPlacement(EmbeddedPlacement())
    model, steps = scenario(client)
    for step in steps:
        step()
    return client.writes


TOTAL = _count_writes()


def test_scenario_writes_enough():
    assert TOTAL >= 10


@pytest.mark.parametrize("mode", ["before", "after", "conflict"])
@pytest.mark.parametrize("fail_at", range(1, TOTAL + 1))
def test_fault_at_every_write(fail_at, mode):
    inner = EmbeddedPlacement()
    client = FaultyPlacement(inner)
    model, steps = scenario(client)
    client.fail_at, client.mode = fail_at + client.writes, mode
    raised = None
    for step in steps:
        try:
            step()
        except errors.NoValidHost:
            continue          # a conflict on a claim ends in NoValidHost
        except (errors.PlacementError, Injected) as exc:
            raised = exc
            break
    assert client.before is not None, "the fault was never reached"
    now = dump(inner)
    if raised is not None:
        # the dead process wrote nothing more after the fault
        assert now == (client.after if mode == "after" else client.before)
    assert invariants.check_providers(inner) == []
    fixes = Reconciler(inner).run(model.states(), apply=True)
    assert all(f.applied for f in fixes), [f.error for f in fixes]
    assert invariants.check_providers(inner) == []
    assert invariants.check_servers(inner, model.states(), exact=True) == []
