"""Dropping a decision's nova objects after its answer, not before.

nova 34 builds a HostState per candidate host for every request (up to
``max_placement_results``, 1,000 by default), each with its compute node,
service, aggregates and instances. Freeing them where the request's frames
end costs about 8 ms a decision at 1,000 hosts, paid before the answer
reaches the conductor. ``BackgroundRelease`` takes the last reference and
drops it in a daemon thread, which runs while the service waits on I/O
(the next request, the claim's HTTP round trip, nova's database reads).
The work is the same; only where it falls moves. With eventlet's monkey
patching the thread is a green thread, and the queue's locks are green.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any


class BackgroundRelease:
    """Drops what it is handed in one daemon thread, started on first use."""

    def __init__(self, name: str = "scheduler-ext-release"):
        self.name = name
        # queue.Queue (locks from threading), not the C SimpleQueue, so that
        # eventlet's monkey patching makes a waiting get() yield
        self._queue: queue.Queue = queue.Queue()
        self._pid = 0       # the process whose thread serves the queue
        self._start_lock = threading.Lock()

    def later(self, holder: list[Any]) -> None:
        """Take ``holder``'s items; they are dropped in the release thread.
        ``holder`` is emptied here, so its owner keeps no reference."""
        if not holder:
            return
        items = holder[:]
        holder.clear()
        self._ensure_thread()
        self._queue.put(items)

    def drain(self) -> None:
        """Wait until everything handed over so far is dropped (tests)."""
        self._queue.join()

    def _ensure_thread(self) -> None:
        # a forked worker (oslo.service) inherits neither the thread nor a
        # usable queue: both are made anew in the process that uses them
        if self._pid == os.getpid():
            return
        with self._start_lock:
            if self._pid != os.getpid():
                self._queue = queue.Queue()
                threading.Thread(target=self._run, args=(self._queue,),
                                 name=self.name, daemon=True).start()
                self._pid = os.getpid()

    @staticmethod
    def _run(q: queue.Queue) -> None:
        while True:
            items = q.get()
            items.clear()       # the last references: the objects go here
            del items
            q.task_done()
