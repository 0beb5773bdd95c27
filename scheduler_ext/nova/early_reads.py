"""The reads a select_destinations call needs before it can choose,
started when the call arrives.

Three reads do not depend on nova's request filters: the fleet view's
refresh (one to three statements on placement's database with the ``sql``
source), the refresh of the host states' mirror (two statements per cell
on nova's cell databases), and, for a resize or cold migration, the
``pre-migrating`` Migration record and what its consumer holds (two
reads, one after the other). nova's request filters, which run first,
themselves wait several milliseconds on nova's databases. ``EarlyReads``
starts them on worker threads as the call arrives; the call then waits
only for what is left.

The refresh still runs after the request arrived, so every increase
placement took before it is seen. When another decision ran while the call
waited for the scheduler's lock, the early refresh is ``stale`` and the
driver refreshes again, as it would without it.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import Future
from typing import Callable, Iterator

from scheduler_ext.moves.request import MoveContext
from scheduler_ext.nova.workers import Workers


class EarlyReads:
    """One call's early refresh (the driver's), move look-up (None: the
    call cannot be a move) and host states' refresh (None: none kept)."""

    def __init__(self, workers: Workers, refresh: Callable[[], None],
                 find_move: Callable[[], MoveContext | None] | None,
                 host_states: Callable[[], bool] | None = None):
        #: None once ``refreshed`` has been asked
        self._refresh: Future | None = workers.submit(refresh)
        self._move: Future | None = workers.submit(find_move) if find_move else None
        self._host_states: Future | None = \
            workers.submit(host_states) if host_states else None
        #: another decision ran since the refresh started
        self.stale = False

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
        """Wait for the early refreshes: True when the driver's ran and
        still counts (once: a multi-create's later instances refresh as
        usual). Raises what a refresh raised."""
        future, self._refresh = self._refresh, None
        if self._host_states is not None:
            self._host_states.result()
        if future is None or self.stale:
            return False
        future.result()
        return True

    def host_states_answered(self) -> bool:
        """Wait for the host states' refresh: True when it ran and every
        cell answered. Raises what it raised."""
        return self._host_states is not None and self._host_states.result()

    def move(self) -> MoveContext | None:
        """Wait for the move look-up (``request.find_move``'s answer, or
        what it raised); None when none was started."""
        return None if self._move is None else self._move.result()
