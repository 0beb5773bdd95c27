"""The reads a select_destinations call needs before it can choose,
started when the call arrives.

Three reads do not depend on nova's request filters: the fleet view's
refresh (one to three statements on placement's database with the ``sql``
source), the refresh of the host states' mirror (two statements per cell
on nova's cell databases), and, for a resize or cold migration, the
``pre-migrating`` Migration record and what its consumer holds (two
reads, one after the other). ``EarlyReads`` starts them on worker threads
as the call arrives; the call then waits only for what is left. nova's
request filters, which run first, wait only for the mirror's service rows
(their minimum compute version, ``compute_version``); the ranking waits
for the rest of the mirror's refresh by taking the view's lock, after the
engine has answered.

The refresh still runs after the request arrived, so every increase
placement took before it is seen. When another decision ran while the call
waited for the scheduler's lock, the early refresh is ``stale`` and the
driver refreshes again, as it would without it.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import Future
from typing import Callable, Iterator, Protocol

from oslo_log import log as logging

from scheduler_ext.moves.request import MoveContext
from scheduler_ext.nova.workers import Workers

LOG = logging.getLogger(__name__)


class HostStatesRefresh(Protocol):
    """``HostStateView.refresh_cells`` for one call's cells: refreshes
    them, handing ``services_taken`` the minimum compute version (or None)
    once their service rows are taken; False when a cell failed."""

    def __call__(self, services_taken: Callable[[int | None], None]) -> bool: ...


class EarlyReads:
    """One call's early refresh (the driver's), move look-up (None: the
    call cannot be a move) and host states' refresh (None: none kept)."""

    def __init__(self, workers: Workers, refresh: Callable[[], None],
                 find_move: Callable[[], MoveContext | None] | None,
                 host_states: HostStatesRefresh | None = None):
        #: None once ``refreshed`` has been asked
        self._refresh: Future | None = workers.submit(refresh)
        self._move: Future | None = workers.submit(find_move) if find_move else None
        self._compute_version: Future = Future()
        self._host_states: Future | None = \
            workers.submit(self._read_host_states, host_states) if host_states else None
        #: another decision ran since the refresh started
        self.stale = False

    def _read_host_states(self, refresh: HostStatesRefresh) -> bool:
        try:
            return refresh(self._compute_version.set_result)
        except Exception:
            # the ranking's own refresh meets it again, in the call
            LOG.exception("the early refresh of the host states failed")
            return False
        finally:
            if not self._compute_version.done():     # it raised first
                self._compute_version.set_result(None)

    @contextlib.contextmanager
    def turn(self, lock: threading.Lock) -> Iterator[None]:
        """Hold ``lock`` (one decision at a time); when it was taken, the
        call waited while another decision ran: the early refresh is
        stale."""
        if not lock.acquire(blocking=False):
            lock.acquire()
            self.stale = True
        try:
            yield
        finally:
            lock.release()

    def refreshed(self) -> bool:
        """Wait for the driver's early refresh: True when it ran and still
        counts (once: a multi-create's later instances refresh as usual).
        Raises what it raised."""
        future, self._refresh = self._refresh, None
        if future is None or self.stale:
            return False
        future.result()
        return True

    def compute_version(self) -> int | None:
        """nova's minimum ``nova-compute`` version across the cells, as the
        host states' refresh took their service rows (it waits for that
        half only); None when a cell did not answer, or no refresh runs."""
        return None if self._host_states is None else self._compute_version.result()

    def move(self) -> MoveContext | None:
        """Wait for the move look-up (``request.find_move``'s answer, or
        what it raised); None when none was started."""
        return None if self._move is None else self._move.result()
