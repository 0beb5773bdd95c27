"""``select_destinations(refreshed=True)``: the caller refreshed the view
after the request arrived (nova's adapter does it on a worker thread as the
call comes in), so the driver does not refresh again; without it, it does."""

import uuid

from scheduler_ext.moves.request import ScheduleRequest
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest
from tests.unit.helpers import small_host, start

SMALL = {"VCPU": 1, "MEMORY_MB": 512}


def _boot(n: int) -> ScheduleRequest:
    return ScheduleRequest((str(uuid.UUID(int=n)),),
                           CandidateRequest(resources=SMALL), "p", "u")


def test_refreshed_skips_the_drivers_own_refresh(monkeypatch):
    client = EmbeddedPlacement()
    host = small_host(client)
    drv, _ = start(client)
    calls = []
    refresh = drv.upkeep.refresh
    monkeypatch.setattr(drv.upkeep, "refresh", lambda: calls.append(1) or refresh())
    drv.refresh()
    sels = drv.select_destinations(_boot(1), refreshed=True)
    assert len(calls) == 1 and sels[0][0].root == host
    drv.select_destinations(_boot(2))
    assert len(calls) == 2
    assert set(client.get_consumer(str(uuid.UUID(int=2))).allocations) == {host}
