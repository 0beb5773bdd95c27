"""Daemon threads of the scheduler process that run work off a request's
own thread.

nova's scheduler service forks its workers (oslo.service) after the
manager is built, and a forked child inherits neither the parent's threads
nor a usable queue: ``Workers`` starts its threads, and makes its queue,
in the process that first submits work. The queue is ``queue.Queue``
(locks from ``threading``), not the C ``SimpleQueue`` that
``concurrent.futures.ThreadPoolExecutor`` waits on, so that under
eventlet's monkey patching a waiting worker yields; results come back as
``concurrent.futures.Future`` objects.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable


class Workers:
    """``count`` daemon threads that run what ``submit`` is given, in the
    order given (one thread: strictly one after the other)."""

    def __init__(self, name: str, count: int = 1):
        self.name = name
        self.count = count
        self._queue: queue.Queue = queue.Queue()
        self._pid = 0       # the process whose threads serve the queue
        self._start_lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run ``fn(*args)`` on a worker; its result or exception comes
        back through the returned Future."""
        future: Future = Future()
        self._ensure_threads()
        self._queue.put((future, fn, args))
        return future

    def drain(self) -> None:
        """Wait until everything submitted so far has run (tests and
        benchmarks)."""
        self._queue.join()

    def _ensure_threads(self) -> None:
        if self._pid == os.getpid():
            return
        with self._start_lock:
            if self._pid != os.getpid():
                self._queue = queue.Queue()
                for n in range(self.count):
                    name = self.name if self.count == 1 else f"{self.name}-{n}"
                    threading.Thread(target=self._run, args=(self._queue,),
                                     name=name, daemon=True).start()
                self._pid = os.getpid()

    @staticmethod
    def _run(q: queue.Queue) -> None:
        while True:
            future, fn, args = q.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:   # handed to whoever waits
                    future.set_exception(exc)
            # the last references to the work and its arguments go here
            del future, fn, args
            q.task_done()
