"""nova bug 1790204 scenarios (tests/unit/moves/test_bug_1790204.py) against a real
placement on 127.0.0.1: the ``client`` fixture here is an HttpPlacement."""

from tests.unit.moves.test_bug_1790204 import *  # noqa: F401,F403  (the tests)

import pytest  # noqa: E402


@pytest.fixture
def client(real_client):
    """Overrides the unit module's embedded placement."""
    return real_client
