"""The reconcile scenarios of tests/unit/moves/test_reconcile_guards.py (issue
33) against a real placement on 127.0.0.1: the ``client`` fixture here is
an HttpPlacement."""

from tests.unit.moves.test_reconcile_guards import *  # noqa: F401,F403  (the tests)

import pytest  # noqa: E402


@pytest.fixture
def client(real_client):
    """Overrides the unit module's embedded placement."""
    return real_client
