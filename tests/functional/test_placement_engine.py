"""The move scenarios with candidates from placement itself (engine
'placement', the fallback for fleets the numpy engine cannot model). The
source host is checked by the engine on its own providers, so no release
is written; the lost-window tests below make the engine unable to model
the query (as for a query beyond it), so the release is a real, journaled
write, and test the window it opens."""

import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.lab import invariants
from scheduler_ext.placement import AllocationWrite
from tests.unit import helpers as moves
from tests.unit.moves.test_bug_1784020 import *  # noqa: F401,F403
from tests.unit.moves.test_bug_1790204 import *  # noqa: F401,F403


@pytest.fixture(autouse=True)
def placement_engine(monkeypatch):
    monkeypatch.setitem(moves.DEFAULTS, "engine", "placement")


@pytest.fixture(autouse=True)
def journal_dir(monkeypatch, tmp_path):
    monkeypatch.setitem(moves.DEFAULTS, "release_journal_dir",
                        str(tmp_path / "journal"))


@pytest.fixture
def engine_cannot_model(monkeypatch):
    """The engine cannot model the query even on the source's providers:
    the placement source asks for a real release."""
    from scheduler_ext.engine.index import CapacityIndex
    from scheduler_ext.sources import placement as placement_source

    class Unmodelled(CapacityIndex):
        def fit(self, *args, **kwargs):
            raise errors.Unsupported("a query beyond the engine (test)")

    monkeypatch.setattr(placement_source, "CapacityIndex", Unmodelled)


@pytest.fixture
def client(real_client):
    """Overrides the unit modules' embedded placement."""
    return real_client


class StealsTheSource:
    """After the move's release write, a concurrent boot takes the space."""

    def __init__(self, inner, host, amount):
        self.inner, self.host, self.amount = inner, host, amount
        self.stolen = False

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name != "post_allocations":
            return attr

        def post(writes):
            attr(writes)
            released = all(not w.allocations for w in writes.values())
            if released and not self.stolen:
                self.stolen = True
                self.inner.put_allocations(str(uuid.UUID(int=77)), AllocationWrite(
                    {self.host: self.amount}, "thief", "thief", None))
        return post


@pytest.mark.parametrize("stolen", [1, 2])
def test_lost_window_with_no_other_host(real_client, stolen, engine_cannot_model):
    """A thief takes 1 vCPU: the new flavor no longer fits, the old one is
    put back (NoValidHost, all as it was). It takes 2: the old one cannot be
    put back either, and the error names the instance."""
    host = moves.small_host(real_client)
    _, model = moves.start(real_client)
    server = model.boot(moves.FLAVOR1)
    thief = StealsTheSource(real_client, host, {"VCPU": stolen})
    model.client = thief
    model.scheduler = moves.start(thief)[0].select_destinations
    expected = errors.NoValidHost if stolen == 1 else errors.SchedulerExtError
    with pytest.raises(expected) as exc:
        model.resize(server.uuid, moves.FLAVOR2)
    assert thief.stolen
    assert server.uuid in str(exc.value)
    if stolen == 1:
        # nova's conductor moved the restored allocations back
        assert real_client.get_consumer(server.uuid).allocations == {host: moves.FLAVOR1}
    else:
        assert "not covered" in str(exc.value)
    assert invariants.check_providers(real_client) == []


def test_lost_window_moves_to_another_host_covered(real_client,
                                                   engine_cannot_model):
    host1 = moves.small_host(real_client, "host1")
    _, model = moves.start(real_client)
    server = model.boot(moves.FLAVOR1)
    host2 = moves.small_host(real_client, "host2")
    thief = StealsTheSource(real_client, host1, {"VCPU": 2})
    model.client = thief
    model.scheduler = moves.start(thief, prefer_same_host=True)[0].select_destinations
    move = model.resize(server.uuid, moves.FLAVOR2)
    assert thief.stolen and move.dest == host2
    assert real_client.get_consumer(server.uuid).allocations == {host2: moves.FLAVOR2}
    assert invariants.check_providers(real_client) == []
