"""Findings 1, 2 and 4 of issue 33 on a real placement: the placement
source's same-host candidate kept on the providers the server holds, the
source found beyond ``placement_results_limit``, no release before the
claim, a class only a sharing provider supplies found there
(``GET /resource_providers?member_of=in:...&required=...``)."""

import pytest

from tests.unit.moves import test_same_host_placement_source as unit
from tests.unit.moves.test_same_host_placement_source import *  # noqa: F401,F403


@pytest.fixture
def client(real_client):
    """Overrides the unit module's embedded placement (a real placement
    counts no writes: the write-count check is the unit module's)."""
    real_client.create_trait(unit.TRAIT)
    return real_client


