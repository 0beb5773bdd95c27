"""One upkeep object: the driver and the strategy tell the source's
``FleetUpkeep`` (the engine's ``FleetView``, or placement's no-op) of
refreshes, writes and refused claims; a candidate source only answers."""

import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.moves.request import ScheduleRequest
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.sources import base
from scheduler_ext.sources.engine import EngineCandidateSource
from scheduler_ext.sources.fleet_view import FleetView
from scheduler_ext.sources.placement import PlacementCandidateSource, PlacementUpkeep
from tests.unit.helpers import small_host, start
from tests.unit.sources.test_placement_source import PlacementWithCandidates

UPKEEP = ("refresh", "after_decision", "changed", "wrote", "recheck",
          "consumer", "root_of")


def _boot(n: int) -> ScheduleRequest:
    return ScheduleRequest((str(uuid.UUID(int=n)),),
                           CandidateRequest({"VCPU": 1}), "p", "u")


@pytest.mark.parametrize("cls", [EngineCandidateSource, PlacementCandidateSource,
                                 base.RankedSource])
def test_candidate_sources_only_answer(cls):
    assert [m for m in UPKEEP if hasattr(cls, m)] == []


def test_the_drivers_upkeep_is_the_fleet_view_the_engine_answers_from():
    client = EmbeddedPlacement()
    small_host(client)
    drv, _ = start(client)
    assert isinstance(drv.upkeep, FleetView)
    assert drv.source.index is drv.upkeep.index
    assert drv.strategy.upkeep is drv.upkeep
    assert drv.fallback is None    # the embedded placement has no candidates endpoint


class Recording:
    """A ``FleetUpkeep`` over another that records what it was told."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __getattr__(self, name):
        method = getattr(self.inner, name)

        def record(*args, **kwargs):
            self.calls.append(name)
            return method(*args, **kwargs)
        return record


def test_the_strategy_tells_the_upkeep_of_its_write_and_refused_claim():
    client = EmbeddedPlacement()
    hosts = [small_host(client, f"host{i}") for i in range(2)]
    drv, _ = start(client, refresh_interval=3600.0)
    told = Recording(drv.upkeep)
    drv.strategy.upkeep = told
    # another scheduler fills the view's best host unseen (no refresh)
    best = drv.source.candidates(CandidateRequest({"VCPU": 1}), limit=1)[0].root
    client.put_allocations(str(uuid.UUID(int=99)), AllocationWrite(
        {best: {"VCPU": 2}}, "x", "x", None))
    chosen = drv.select_destinations(_boot(1), max_alternates=0)[0][0].root
    assert chosen != best and chosen in hosts
    assert told.calls == ["changed", "wrote"]


def test_a_view_that_finds_nothing_is_rechecked_through_the_upkeep():
    client = EmbeddedPlacement()
    small_host(client)
    drv, _ = start(client)
    told = Recording(drv.upkeep)
    drv.strategy.upkeep = told
    with pytest.raises(errors.NoValidHost):
        drv.select_destinations(ScheduleRequest(
            (str(uuid.UUID(int=1)),), CandidateRequest({"VCPU": 64}), "p", "u"))
    assert told.calls == ["recheck"]


def test_placement_upkeep_keeps_nothing_and_reads_placement():
    client = EmbeddedPlacement()
    host = small_host(client)
    consumer = str(uuid.UUID(int=5))
    client.put_allocations(consumer, AllocationWrite({host: {"VCPU": 1}}, "p", "u", None))
    upkeep, source = PlacementCandidateSource.build(
        PlacementWithCandidates(client), start(client)[0].conf)
    assert isinstance(upkeep, PlacementUpkeep)
    assert upkeep.consumer(consumer).allocations == {host: {"VCPU": 1}}
    assert upkeep.root_of({host: {"VCPU": 1}}) is None
    assert upkeep.recheck(CandidateRequest({"VCPU": 64}), 10, [host]) is False
    assert [c.root for c in source.candidates(CandidateRequest({"VCPU": 1}),
                                              limit=5)] == [host]

