"""nova's minimum ``nova-compute`` version, answered from the host states'
mirror during a call.

nova's request filter ``owner_nova_filter`` asks every cell's database
for the smallest ``nova-compute`` service version at every request
(``objects.service.get_minimum_version_all_cells``): a scan of each
cell's services table, 9 ms at 10,000 hosts and 22 ms at 50,000 in the
end-to-end benchmark. The host states' mirror holds those rows, refreshed
after the call arrived, so a call answers it from the mirror instead.

``install`` (as the scheduler starts) puts ``minimum_version_all_cells``
in place of the function it finds there, nova's or a test fixture's. Outside
``answered_by`` it is that function; inside it, the ``nova-compute``
question without ``require_all`` is answered by the given callable, unless
that gives None (a cell did not answer the mirror's refresh): then the
function found is asked.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence

from nova.objects import service as service_obj

#: this call's answer (see ``answered_by``); a context variable, so that
#: concurrent calls (green or native threads) each see their own
_ANSWER: contextvars.ContextVar[Callable[[], int | None] | None] = \
    contextvars.ContextVar("scheduler_ext_minimum_compute_version", default=None)

#: the function ``install`` found in nova's module
_novas: Callable | None = None


def install() -> None:
    """Put ``minimum_version_all_cells`` in place of the function in nova's
    module, unless it is there already."""
    global _novas
    found = service_obj.get_minimum_version_all_cells
    if found is not minimum_version_all_cells:
        _novas = found
        service_obj.get_minimum_version_all_cells = minimum_version_all_cells


def minimum_version_all_cells(context, binaries: Sequence[str],
                              require_all: bool = False) -> int:
    """nova's ``get_minimum_version_all_cells``, answered by this call's
    ``answered_by`` callable where it applies."""
    assert _novas is not None
    answer = _ANSWER.get()
    if answer is not None and list(binaries) == ["nova-compute"] and not require_all:
        version = answer()
        if version is not None:
            return version
    return _novas(context, binaries, require_all)


@contextlib.contextmanager
def answered_by(answer: Callable[[], int | None]) -> Iterator[None]:
    """Within the block, nova's minimum ``nova-compute`` version is
    ``answer()`` (asked when nova asks; None: nova reads the cells)."""
    token = _ANSWER.set(answer)
    try:
        yield
    finally:
        _ANSWER.reset(token)
