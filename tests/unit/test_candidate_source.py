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


def _four_hosts():
    client = EmbeddedPlacement()
    hosts = [small_host(client, f"host{i}") for i in range(4)]
    return client, hosts


def test_max_alternates_per_call():
    client, hosts = _four_hosts()
    drv, _ = start(client)
    req = ScheduleRequest((str(uuid.UUID(int=1)),), {"VCPU": 1}, "p", "u")
    assert len(drv.select_destinations(req)[0]) == 3          # claimed + 2
    req = ScheduleRequest((str(uuid.UUID(int=2)),), {"VCPU": 1}, "p", "u")
    assert len(drv.select_destinations(req, max_alternates=0)[0]) == 1
    req = ScheduleRequest((str(uuid.UUID(int=3)),), {"VCPU": 1}, "p", "u")
    assert len(drv.select_destinations(req, max_alternates=5)[0]) == 4


class Without:
    """A candidate source that hides one host (like a host filter)."""

    def __init__(self, inner, host):
        self.inner, self.host = inner, host
        self.virtual_release = inner.virtual_release

    def candidates(self, request, *, limit):
        return [c for c in self.inner.candidates(request, limit=limit + 1)
                if c.root != self.host][:limit]

    def move_candidates(self, request, **kw):
        return self.inner.move_candidates(request, **kw)

    def changed(self, providers):
        self.inner.changed(providers)

    def refresh(self):
        self.inner.refresh()


def test_wrap_sources_filters_every_decision():
    client, hosts = _four_hosts()
    drv, _ = start(client)
    wrapped = drv.wrap_sources(lambda inner: Without(inner, hosts[0]))
    assert all(isinstance(w, Without) for w in wrapped)
    roots = {s.root for n in range(1, 7) for s in drv.select_destinations(
        ScheduleRequest((str(uuid.UUID(int=n)),), {"VCPU": 1}, "p", "u"))[0]}
    assert hosts[0] not in roots and len(roots) == 3
