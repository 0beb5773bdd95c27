"""Bad input is rejected cleanly, and refused writes change nothing.

Against ``EmbeddedPlacement``; ``tests/functional/test_placement_bad_input_real.py``
runs the same cases against a real placement through ``HttpPlacement``.
Every bad input raises ``InvalidRequest`` whose ``field`` and ``value`` (and
message) name the offending input, and a snapshot of everything observable
(providers and generations, inventories, usages, traits, aggregates,
allocations per provider and per consumer with generations) taken before
equals the one after. Every refused write (409: capacity, min/max/step,
missing inventory, generation conflicts, in-use; 404 delete) leaves the same
snapshot and no consumer record behind.
"""

from __future__ import annotations

import socket

import pytest
from keystoneauth1 import exceptions as ks_exc

from scheduler_ext import errors
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.placement.model import AllocationWrite, Inventory
from tests.placement_cases import (
    BAD_INPUT_CASES, CONFLICT_CASES, build_fleet, check_bad_input,
    check_missing_provider_write, check_refused, state)


@pytest.mark.parametrize("make", [m for _, m in BAD_INPUT_CASES],
                         ids=[i for i, _ in BAD_INPUT_CASES])
def test_bad_input_is_rejected_and_changes_nothing(make):
    check_bad_input(EmbeddedPlacement(), make)


@pytest.mark.parametrize("make", [m for _, m in CONFLICT_CASES],
                         ids=[i for i, _ in CONFLICT_CASES])
def test_refused_write_changes_nothing(make):
    check_refused(EmbeddedPlacement(), make)


def test_uncreated_custom_class_is_invalid_request_and_changes_nothing():
    p = EmbeddedPlacement()
    fleet = build_fleet(p)
    before = state(p, fleet)
    gen = p.get_provider(fleet.cn1).generation
    with pytest.raises(errors.InvalidRequest) as info:
        p.set_inventories(fleet.cn1, gen, {"CUSTOM_NEVER_CREATED": Inventory(1)})
    assert info.value.value == "CUSTOM_NEVER_CREATED"
    assert "CUSTOM_NEVER_CREATED" in str(info.value)
    with pytest.raises(errors.InvalidRequest):
        p.put_allocations(fleet.c1, AllocationWrite(
            {fleet.cn1: {"CUSTOM_NEVER_CREATED": 1}}, "proj", "user",
            p.get_consumer(fleet.c1).generation))
    with pytest.raises(errors.InvalidRequest):
        p.set_traits(fleet.cn1, gen, ["CUSTOM_NEVER_CREATED"])
    assert state(p, fleet) == before


def test_write_naming_missing_provider_changes_no_allocations():
    check_missing_provider_write(EmbeddedPlacement())



def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]   # closed again when the socket is


@pytest.mark.parametrize("call", [
    lambda p: p.list_providers(),
    lambda p: p.get_consumer("7b5b9f2e-3f0e-4a55-9a4e-0d6c1c1a7f00"),
    lambda p: p.put_allocations(
        "7b5b9f2e-3f0e-4a55-9a4e-0d6c1c1a7f00",
        AllocationWrite({"7b5b9f2e-3f0e-4a55-9a4e-0d6c1c1a7f01": {"VCPU": 1}},
                        "proj", "user", None)),
    lambda p: p.snapshot(),
], ids=["list", "get-consumer", "put-allocations", "snapshot"])
def test_placement_down_raises_placement_unavailable(call):
    port = _closed_port()
    p = HttpPlacement.from_url(f"http://127.0.0.1:{port}", timeout=5)
    with pytest.raises(errors.PlacementUnavailable) as info:
        call(p)
    exc = info.value
    assert exc.status == 503
    text = str(exc)
    assert "placement unreachable" in text
    assert f"127.0.0.1:{port}" in text


def test_bad_input_is_checked_before_placement_is_contacted():
    """HttpPlacement validates before it sends: with placement down, bad
    input is still InvalidRequest, not PlacementUnavailable."""
    p = HttpPlacement.from_url(f"http://127.0.0.1:{_closed_port()}", timeout=5)
    with pytest.raises(errors.InvalidRequest) as info:
        p.set_inventories("7b5b9f2e-3f0e-4a55-9a4e-0d6c1c1a7f00", 0,
                          {"VCPU": Inventory(0)})
    assert info.value.field == "inventories[VCPU].total"


class _FailingAdapter:
    """Stands in for a keystoneauth Adapter whose requests fail."""

    def __init__(self, exc=None, status=None):
        self.exc, self.status = exc, status

    def request(self, url, method, **kwargs):
        if self.exc is not None:
            raise self.exc
        import requests
        resp = requests.Response()
        resp.status_code = self.status
        resp._content = b'{"errors": [{"status": 500, "detail": "boom"}]}'
        resp.headers["openstack-request-id"] = "req-1"
        return resp


@pytest.mark.parametrize("exc, reason", [
    (ks_exc.SSLError("no way"), "TLS handshake failed"),
    (ks_exc.ConnectTimeout("no way"), "no answer in time"),
    (ks_exc.UnknownConnectionError("no way", None), "connection failed"),
    (ks_exc.EndpointNotFound("no way"), "no placement endpoint"),
], ids=lambda e: type(e).__name__ if isinstance(e, Exception) else "")
def test_transport_failures_are_placement_unavailable(exc, reason):
    p = HttpPlacement(_FailingAdapter(exc=exc))
    with pytest.raises(errors.PlacementUnavailable) as info:
        p.list_providers()
    assert "placement unreachable" in str(info.value)
    assert reason in str(info.value)


def test_server_error_is_placement_unavailable():
    p = HttpPlacement(_FailingAdapter(status=500))
    with pytest.raises(errors.PlacementUnavailable) as info:
        p.list_providers()
    assert info.value.status == 500
    assert info.value.request_id == "req-1"
    assert "boom" in str(info.value)
