"""Functional tests run against a real openstack-placement on 127.0.0.1.

One service is started per test session (gunicorn, sqlite on tmpfs) and
stopped at the end. Tests isolate themselves by using fresh UUIDs.
"""

import pytest

from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.lab.placement_server import LocalPlacement


@pytest.fixture(scope="session")
def placement_url():
    server = LocalPlacement()
    url = server.start()
    yield url
    server.stop()


@pytest.fixture
def real_placement(placement_url):
    """An HttpPlacement client of the session's placement service."""
    return HttpPlacement.from_url(placement_url)


@pytest.fixture(scope="session")
def private_placement_url():
    """A second placement service, for tests that read the whole fleet (the
    scheduler does) and so must not see other tests' providers."""
    server = LocalPlacement()
    url = server.start()
    yield url
    server.stop()


def _empty(client):
    """Delete every allocation and provider (children before parents)."""
    providers = client.list_providers()
    for prov in providers:
        for consumer in client.get_provider_allocations(prov.uuid):
            try:
                client.delete_allocations(consumer)
            except Exception:   # already gone with another provider's pass
                pass
    for prov in sorted(providers, key=lambda p: p.parent_provider_uuid is None):
        client.delete_provider(prov.uuid)


@pytest.fixture
def real_client(private_placement_url):
    """A real placement holding nothing but what the test creates."""
    c = HttpPlacement.from_url(private_placement_url)
    _empty(c)
    yield c
    _empty(c)
