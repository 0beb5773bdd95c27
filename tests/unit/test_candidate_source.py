"""The engine's view of placement: re-read before each request unless
refresh_interval says it is fresh enough."""

import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.placement import AllocationWrite, EmbeddedPlacement
from scheduler_ext.request import ScheduleRequest
from tests.unit.moves import small_host, start

FULL = {"VCPU": 2, "MEMORY_MB": 8192, "DISK_GB": 1028}


def _boot_full(drv, n):
    return drv.select_destinations(ScheduleRequest(
        (str(uuid.UUID(int=n)),), FULL, "p", "u"))


@pytest.mark.parametrize("interval, sees_free_host", [(0.0, True), (3600.0, False)])
def test_refresh_interval(interval, sees_free_host):
    client = EmbeddedPlacement()
    host = small_host(client)
    other = str(uuid.UUID(int=50))
    client.put_allocations(other, AllocationWrite({host: FULL}, "x", "x", None))
    drv, _ = start(client, refresh_interval=interval)
    client.delete_allocations(other)   # no provider generation moves
    if sees_free_host:
        assert _boot_full(drv, 1)[0][0].root == host
    else:
        with pytest.raises(errors.NoValidHost):
            _boot_full(drv, 1)
        assert client.get_consumer(str(uuid.UUID(int=1))).allocations == {}
