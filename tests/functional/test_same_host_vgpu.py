"""Finding 5 of issue 33 on a real placement: a same-host vGPU resize
claims the new vGPU beside the old one and ends where stock ends, with
placement's own answers (``engine = placement``) and with the engine."""

import pytest

from tests.functional.conftest import _empty
from tests.unit.moves.test_same_host_vgpu import *  # noqa: F401,F403


@pytest.fixture
def fresh(real_client):
    """Overrides the unit module's embedded placement: the real one,
    emptied for each run."""
    def emptied():
        _empty(real_client)
        return real_client
    return emptied
