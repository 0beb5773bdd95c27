"""The move scenarios with candidates from placement itself (engine
'placement', the fallback for fleets the numpy engine cannot model). The
source host is checked by the engine on its own providers: no release is
ever written."""

import pytest

from tests.unit import helpers as moves
from tests.unit.moves.test_bug_1784020 import *  # noqa: F401,F403
from tests.unit.moves.test_bug_1790204 import *  # noqa: F401,F403


@pytest.fixture(autouse=True)
def placement_engine(monkeypatch):
    monkeypatch.setitem(moves.DEFAULTS, "engine", "placement")


@pytest.fixture
def client(real_client):
    """Overrides the unit modules' embedded placement."""
    return real_client
