"""Finding 3 of issue 14: a reconcile run never loses work. One
instance's failure (a plan that raises, a 409 or 5xx on its write, a task
running) is isolated and retried with backoff; the watermark never moves
past an instance not fully reconciled."""

import datetime
import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.moves import tracker as tr
from scheduler_ext.moves.reconcile import InstanceState, MoveState, Reconciler
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.embedded import EmbeddedPlacement
from tests.unit.helpers import small_host

OLD = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 100}
MAX = {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 100}
T0 = datetime.datetime(2026, 1, 1, 12, 0, 0)


def _reverted(client, host, inst):
    """A reverted same-host resize: the instance holds max(old, new)."""
    client.put_allocations(inst, AllocationWrite({host: MAX}, "p", "u", None))
    return InstanceState(inst, host, OLD, "p", "u",
                         (MoveState(str(uuid.uuid4()), "", "", {}, {}, False),))


class FailsFor:
    """Delegates to ``inner``; writes touching ``consumer`` fail with
    ``exc``."""

    def __init__(self, inner, consumer, exc):
        self.inner, self.consumer, self.exc = inner, consumer, exc

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def post_allocations(self, writes):
        if self.consumer in writes:
            raise self.exc
        return self.inner.post_allocations(writes)


def test_an_instance_whose_plan_raises_does_not_abort_the_run():
    client = EmbeddedPlacement()
    host = small_host(client)
    gone_host = str(uuid.uuid4())            # its provider was deleted
    broken = InstanceState(str(uuid.uuid4()), gone_host, OLD, "p", "u")
    fine = _reverted(client, host, str(uuid.uuid4()))
    fixes = Reconciler(client).run([broken, fine], apply=True)
    by_uuid = {f.instance_uuid: f for f in fixes}
    assert by_uuid[fine.uuid].applied
    assert not by_uuid[broken.uuid].applied and by_uuid[broken.uuid].error
    assert client.get_consumer(fine.uuid).allocations == {host: OLD}


@pytest.mark.parametrize("exc", [
    errors.ConcurrentUpdate("injected 409"),
    errors.PlacementUnavailable("injected 503")])
def test_a_failed_write_is_reported_and_the_others_applied(exc):
    inner = EmbeddedPlacement()
    host = small_host(inner, "host1")
    other = small_host(inner, "host2")
    a = _reverted(inner, host, str(uuid.uuid4()))
    b = _reverted(inner, other, str(uuid.uuid4()))
    fixes = Reconciler(FailsFor(inner, a.uuid, exc)).run([a, b], apply=True)
    by_uuid = {f.instance_uuid: f for f in fixes}
    assert not by_uuid[a.uuid].applied and "injected" in by_uuid[a.uuid].error
    assert by_uuid[b.uuid].applied
    assert inner.get_consumer(a.uuid).allocations == {host: MAX}
    assert inner.get_consumer(b.uuid).allocations == {other: OLD}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_watermark_does_not_move_past_an_instance_to_retry():
    clock = Clock()
    t = tr.ReconcileTracker(clock)
    changed = {"a": tr.Change("cell", T0),
               "b": tr.Change("cell", T0 + datetime.timedelta(seconds=5))}
    started = T0 + datetime.timedelta(seconds=10)
    work = t.work(changed)
    assert set(work) == {"a", "b"}
    t.finish(started, {"a": tr.RETRY, "b": tr.DONE}, work, changed)
    assert t.watermark == T0                  # a is not reconciled yet
    assert t.since(started) <= T0
    # a is in backoff: the next poll still returns it, but it waits
    clock.now = 1.0
    assert set(t.work(changed)) == set()
    clock.now = tr.BASE_BACKOFF + 0.1
    assert set(t.work(changed)) == {"a"}
    t.finish(started + datetime.timedelta(seconds=30), {"a": tr.RETRY}, work,
             changed)
    assert t.pending["a"].attempts == 2       # backoff doubled
    assert t.pending["a"].next_at == pytest.approx(
        clock.now + 2 * tr.BASE_BACKOFF)
    later = started + datetime.timedelta(seconds=60)
    clock.now = 100.0
    work = t.work(changed)
    t.finish(later, {"a": tr.DONE}, work, changed)
    assert t.watermark == later and not t.pending


def test_a_busy_or_failing_instance_never_blocks_the_others():
    clock = Clock()
    t = tr.ReconcileTracker(clock)
    t.finish(T0, {"stuck": tr.RETRY}, {"stuck": "cell"}, {})
    t.pending["stuck"].next_at = 1e9          # long backoff
    fresh = {"new": tr.Change("cell", T0 + datetime.timedelta(seconds=1))}
    assert set(t.work(fresh)) == {"new"}


def test_a_woken_instance_is_worked_on_at_once_despite_its_backoff():
    clock = Clock()
    t = tr.ReconcileTracker(clock)
    t.finish(T0, {"a": tr.RETRY}, {"a": "cell"}, {})
    t.pending["a"].next_at = 1e9
    t.wake("a")
    assert t.woken_event.is_set()
    assert t.work({}) == {"a": "cell"}
    assert not t.woken_event.is_set()


def test_a_change_in_the_same_whole_second_as_the_one_reconciled_is_worked_on():
    """Issue 33 finding 9: on MySQL nova's ``updated_at`` is whole
    seconds, so a confirm in the same second as ``finished`` has the same
    change time. What changed (the migration's status) tells them apart:
    the confirm is reconciled, and a poll that sees nothing new skips it."""
    t = tr.ReconcileTracker(Clock())
    finished = {"a": tr.Change("cell", T0, (("m1", "finished"),))}
    work = t.work(finished)
    assert set(work) == {"a"}
    t.finish(T0, {"a": tr.DONE}, work, finished)
    assert t.work(finished) == {}               # the same change again
    confirmed = {"a": tr.Change("cell", T0, (("m1", "confirmed"),))}
    work = t.work(confirmed)
    assert work == {"a": "cell"}
    t.finish(T0, {"a": tr.DONE}, work, confirmed)
    assert t.work(confirmed) == {}


def test_a_woken_instance_is_not_worked_on_again_for_a_change_it_was_woken_for():
    """A notification's instance reconciled at ``started``: a later poll
    returning the change (earlier, by nova's clock) does not redo it."""
    t = tr.ReconcileTracker(Clock())
    t.wake("a", "cell")
    started = T0 + datetime.timedelta(seconds=1)
    work = t.work({})
    t.finish(started, {"a": tr.DONE}, work, {})
    assert t.work({"a": tr.Change("cell", T0, (("m1", "confirmed"),))}) == {}
