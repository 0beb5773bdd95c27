"""Finding 4 of issue 14: the real-release path (release, then claim) is
crash-safe. The release is journaled first; any exception after it, ours
or not, restores; a crash leaves the journal entry, which a restarted
scheduler's recovery restores."""

import dataclasses
import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.lab import invariants
from scheduler_ext.moves.journal import ReleaseJournal
from scheduler_ext.moves.request import MoveContext, ScheduleRequest
from scheduler_ext.moves.strategy import SameHostMoveStrategy
from scheduler_ext.placement import AllocationWrite, EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.sources.engine import EngineCandidateSource
from scheduler_ext import driver as se_driver
from tests.unit.helpers import small_host

OLD = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 100}
NEW = {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 100}


class RealReleaseSource(EngineCandidateSource):
    """A source that cannot treat the old allocations as free without a
    real release (as placement's answer for a query the engine cannot
    model); after the release, it answers from placement's state."""

    virtual_release = False

    def move_candidates(self, query, *, limit, source, released):
        self.view.refresh()
        return super().move_candidates(query, limit=limit, source=source,
                                       released=None)


class Dies(Exception):
    """Not ours: a keystoneauth error, a body that is not JSON, a thread
    being killed..."""


class FailAt:
    """Delegates to ``inner``; allocation writes number ``at`` and after
    raise ``exc`` (``at`` counts from 1)."""

    def __init__(self, inner, at, exc, until=None):
        self.inner, self.at, self.exc, self.until = inner, at, exc, until
        self.n = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def post_allocations(self, writes):
        self.n += 1
        if self.n >= self.at and (self.until is None or self.n <= self.until):
            raise self.exc
        return self.inner.post_allocations(writes)


@pytest.fixture
def setup(tmp_path):
    inner = EmbeddedPlacement()
    host = small_host(inner)
    server, migration = str(uuid.uuid4()), str(uuid.uuid4())
    inner.put_allocations(migration, AllocationWrite(
        {host: OLD}, "p", "u", None, "MIGRATION"))
    request = ScheduleRequest((server,), CandidateRequest(NEW), "p", "u",
                              move=MoveContext(migration, host, OLD))
    journal = ReleaseJournal(tmp_path / "journal")

    def strategy(client):
        source = RealReleaseSource(client, se_driver.make_conf(
            refresh_interval=0))
        return SameHostMoveStrategy(client, source, journal=journal)
    return inner, host, server, migration, request, journal, strategy


def _as_before(inner, host, server, migration):
    assert inner.get_consumer(migration).allocations == {host: OLD}
    assert inner.get_consumer(server).allocations == {}
    assert invariants.check_providers(inner) == []


def test_real_release_claims_and_clears_its_journal(setup):
    inner, host, server, migration, request, journal, strategy = setup
    sels = strategy(inner).select(request)[0]
    assert sels[0].root == host
    assert inner.get_consumer(server).allocations == {host: NEW}
    assert journal.entries() == []


@pytest.mark.parametrize("exc", [Dies("keystoneauth: token expired"),
                                 ValueError("body is not JSON")])
def test_an_error_not_ours_after_the_release_restores(setup, exc):
    inner, host, server, migration, request, journal, strategy = setup
    client = FailAt(inner, 2, exc, until=2)    # the claim fails
    with pytest.raises(type(exc)):
        strategy(client).select(request)
    _as_before(inner, host, server, migration)
    assert journal.entries() == []


def test_a_crash_between_release_and_claim_is_restored_by_the_journal(setup):
    inner, host, server, migration, request, journal, strategy = setup
    client = FailAt(inner, 2, Dies("the process dies"))   # nothing after
    with pytest.raises(Dies):
        strategy(client).select(request)
    # the release was written, the claim and the restore were not
    assert inner.get_consumer(migration).allocations == {}
    [entry] = journal.entries()
    assert entry["held"][migration] == {host: OLD}
    # a restarted scheduler (a new journal object on the same directory)
    restarted = ReleaseJournal(journal.directory)
    assert restarted.recover(inner, stale=0) == [migration]
    _as_before(inner, host, server, migration)
    assert restarted.entries() == []


def test_recovery_never_writes_over_a_later_write(setup):
    inner, host, server, migration, request, journal, strategy = setup
    with pytest.raises(Dies):
        strategy(FailAt(inner, 2, Dies("dies"))).select(request)
    # nova's conductor gave up the move and wrote the instance since
    inner.put_allocations(server, AllocationWrite({host: OLD}, "p", "u", None))
    assert ReleaseJournal(journal.directory).recover(inner, stale=0) == []
    assert inner.get_consumer(server).allocations == {host: OLD}
    assert inner.get_consumer(migration).allocations == {}
    assert journal.entries() == []


def test_no_release_without_the_journal(setup, tmp_path):
    inner, host, server, migration, request, journal, strategy = setup
    blocker = tmp_path / "file"
    blocker.write_text("")
    s = strategy(inner)
    s.journal = ReleaseJournal(blocker / "journal")   # cannot be created
    with pytest.raises(errors.SchedulerExtError, match="release journal"):
        s.select(request)
    _as_before(inner, host, server, migration)


def test_a_real_release_reads_an_instance_taken_as_empty(setup):
    """A move found with its migration read takes the instance as holding
    nothing; a real release journals and releases what placement holds."""
    inner, host, server, migration, request, journal, strategy = setup
    kept = {"MEMORY_MB": 512}
    inner.put_allocations(server, AllocationWrite({host: kept}, "p", "u", None))
    request = dataclasses.replace(request, move=dataclasses.replace(
        request.move, migration_held=inner.get_consumer(migration)))
    client = FailAt(inner, 2, Dies("the process dies"))   # after the release
    with pytest.raises(Dies):
        strategy(client).select(request)
    [entry] = journal.entries()
    assert entry["held"] == {migration: {host: OLD}, server: {host: kept}}
    assert ReleaseJournal(journal.directory).recover(inner, stale=0) == [migration]
    assert inner.get_consumer(server).allocations == {host: kept}
    assert inner.get_consumer(migration).allocations == {host: OLD}
