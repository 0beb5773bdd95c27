"""Functional tests run against a real openstack-placement on 127.0.0.1.

One service is started per test session (gunicorn, sqlite on tmpfs) and
stopped at the end. Tests isolate themselves by using fresh UUIDs.
"""

import pytest

from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.placement.server import LocalPlacement


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
