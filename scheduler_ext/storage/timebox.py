"""Run a call that may never return, and give up after a timeout.

A filesystem call on a hung network or cluster filesystem can sit in the
kernel for ever, and some (a hard NFS mount without TASK_KILLABLE, a
proprietary cluster module) cannot be interrupted. Two ways to give up:

* ``in_thread``: the call runs in a daemon thread; after the timeout the
  caller moves on and the thread is left blocked. Cheap, and what the tests
  use with injected calls, but a thread stuck in the kernel can delay the
  exit of the whole process.
* ``in_child``: the call runs in a forked child process and its result
  comes back pickled through a pipe; after the timeout the child is killed
  and not waited for, so a child stuck in the kernel never holds this
  process (it is reaped by init once it dies). The result and any
  exception must pickle (stat and statvfs results, strings, OSError do).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import time
from typing import Any, Callable, TypeVar

T = TypeVar("T")

#: children killed after a timeout and not reaped yet (reaped when they die)
_killed: set[int] = set()


def _reap() -> None:
    for pid in list(_killed):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _killed.discard(pid)


def in_thread(fn: Callable[[], T], timeout: float,
              on_timeout: Callable[[], Exception]) -> T:
    """``fn()`` in a daemon thread; ``on_timeout()`` is raised if it has not
    returned after ``timeout`` seconds, else its result or its exception."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:   # handed to the caller below
            box["error"] = exc
    worker = threading.Thread(target=run, daemon=True,
                              name="scheduler-ext-storage-probe")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise on_timeout()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _child(write_fd: int, fn: Callable[[], Any]) -> None:
    try:
        try:
            payload = pickle.dumps(("value", fn()))
        except BaseException as exc:   # sent to the parent
            try:
                payload = pickle.dumps(("error", exc))
            except Exception:
                payload = pickle.dumps(("error", OSError(repr(exc))))
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view):]
    finally:
        os._exit(0)


def _read_all(read_fd: int, deadline: float) -> bytes | None:
    """Everything until EOF, or None if the deadline passes first."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([read_fd], [], [], left)[0]:
            return None
        chunk = os.read(read_fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def in_child(fn: Callable[[], T], timeout: float,
             on_timeout: Callable[[], Exception]) -> T:
    """``fn()`` in a forked child; ``on_timeout()`` is raised if no answer
    came after ``timeout`` seconds (the child is killed, not waited for)."""
    _reap()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:                                  # the child
        os.close(read_fd)
        _child(write_fd, fn)
    os.close(write_fd)
    try:
        data = _read_all(read_fd, time.monotonic() + timeout)
    finally:
        os.close(read_fd)
    if data is None:
        os.kill(pid, signal.SIGKILL)
        _killed.add(pid)          # not waited for: it may be stuck in the kernel
        _reap()
        raise on_timeout()
    os.waitpid(pid, 0)
    kind, value = pickle.loads(data)
    if kind == "error":
        raise value
    return value
