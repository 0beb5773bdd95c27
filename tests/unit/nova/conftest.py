"""Fixtures of the nova unit tests."""

import pytest

from tests.unit.nova.generators import nova_conf_overrides


@pytest.fixture
def nova_conf():
    """nova's global configuration, overrides undone after the test."""
    with nova_conf_overrides() as fixture:
        yield fixture
