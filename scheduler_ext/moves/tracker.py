"""Which instances a change-driven reconcile works on, and its watermark.

The reconcile service asks nova for the instances whose migrations changed
since ``since()`` (the watermark less an overlap), adds the instances a
notification named (``wake``) and those whose retry is due, and reports
each instance's outcome to ``finish``:

* ``DONE``: placement agrees (or the instance is gone): forgotten;
* ``RETRY``: a fix failed (409, 5xx), the plan failed, or the instance was
  busy (a task running): kept, retried after a backoff that doubles per
  attempt (``BASE_BACKOFF`` up to ``MAX_BACKOFF`` seconds), never blocking
  the others.

The watermark moves only past instances fully reconciled: it is the start
of the last run, or the earliest change of an instance still pending if
that is older. Time: change times and run starts are datetimes (nova's
``updated_at``, UTC); backoffs use ``time.monotonic`` seconds.

A change is its time and its ``mark`` (what changed: the migrations'
statuses): on MySQL ``updated_at`` is whole seconds, so a confirm in the
same second as ``finished`` has the same time and only the mark tells it
from the change already reconciled.
"""

from __future__ import annotations

import dataclasses
import datetime
import threading
import time
from typing import Callable, Hashable, Iterable, Mapping

DONE = "done"
RETRY = "retry"
#: seconds before the first retry of an instance; doubles per attempt
BASE_BACKOFF = 2.0
MAX_BACKOFF = 300.0
#: how far back the first run after a start looks for changes
FIRST_LOOKBACK = datetime.timedelta(days=1)
#: overlap between runs: a record written while a run was reading is seen
#: again by the next one
OVERLAP = datetime.timedelta(seconds=30)


@dataclasses.dataclass(frozen=True)
class Change:
    """A change of an instance's move records: ``where`` to find the
    instance (nova: its cell), ``when`` (nova's ``updated_at``, whole
    seconds on MySQL) and ``mark``, what the records said then (equal
    marks at one time: the same change)."""

    where: Hashable
    when: datetime.datetime
    mark: Hashable = None

    def seen_by(self, done: "Change") -> bool:
        """``done`` (the change last reconciled) already covers this one."""
        return self.when < done.when or (
            self.when == done.when and self.mark == done.mark)


@dataclasses.dataclass
class Pending:
    """An instance not reconciled yet. ``where`` is what the caller needs
    to find it again (nova: its cell)."""

    where: Hashable
    change: Change
    attempts: int = 0
    next_at: float = 0.0


class ReconcileTracker:
    """Watermark, retry set and wake-ups of a change-driven reconcile
    (see the module docstring). Thread-safe: notifications call ``wake``
    from another thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.watermark: datetime.datetime | None = None
        self.pending: dict[str, Pending] = {}
        #: instances reconciled, with the change they were reconciled for
        #: (a poll's overlap returns them again: not worked on twice)
        self.done: dict[str, Change] = {}
        self._woken: dict[str, Hashable] = {}
        self._lock = threading.Lock()
        self.woken_event = threading.Event()

    def since(self, started: datetime.datetime) -> datetime.datetime:
        """Where the run starting at ``started`` looks back to."""
        if self.watermark is None:
            return started - FIRST_LOOKBACK
        return self.watermark - OVERLAP

    def wake(self, instance: str, where: Hashable = None) -> None:
        """Reconcile ``instance`` at the next run, backoff or not (a
        notification said its move ended)."""
        with self._lock:
            self._woken[instance] = where
        self.woken_event.set()

    def work(self, changed: Mapping[str, Change]) -> dict[str, Hashable]:
        """The instances to reconcile now (instance: where): changed ones
        not in backoff, pending ones whose retry is due, woken ones.
        ``changed`` maps an instance to its latest Change."""
        now = self.clock()
        with self._lock:
            woken, self._woken = self._woken, {}
            self.woken_event.clear()
        out: dict[str, Hashable] = {}
        for uuid, change in changed.items():
            p = self.pending.get(uuid)
            if p is None and uuid in self.done and change.seen_by(self.done[uuid]):
                continue
            if p is None:
                self.pending[uuid] = Pending(change.where, change)
                out[uuid] = change.where
            elif not change.seen_by(p.change) or p.next_at <= now:
                p.change = change
                out[uuid] = change.where
        for uuid, p in self.pending.items():
            if p.next_at <= now:
                out.setdefault(uuid, p.where)
        for uuid, where in woken.items():
            out[uuid] = where if where is not None else (
                self.pending[uuid].where if uuid in self.pending else None)
        return out

    def finish(self, started: datetime.datetime,
               outcomes: Mapping[str, str], where: Mapping[str, Hashable],
               changed: Mapping[str, Change]) -> None:
        """Record a run's outcomes and move the watermark (module
        docstring). ``changed`` is what the run's poll returned; an
        instance not in it nor pending (woken) counts as changed at
        ``started``."""
        now = self.clock()
        for uuid, outcome in outcomes.items():
            p = self.pending.get(uuid)
            change = p.change if p else changed.get(
                uuid, Change(where.get(uuid), started))
            if outcome == DONE:
                self.pending.pop(uuid, None)
                self.done[uuid] = change
                continue
            p = self.pending.setdefault(uuid, Pending(where.get(uuid), change))
            p.attempts += 1
            p.next_at = now + min(MAX_BACKOFF,
                                  BASE_BACKOFF * 2 ** (p.attempts - 1))
        oldest = min((p.change.when for p in self.pending.values()),
                     default=started)
        self.watermark = min(started, oldest)
        horizon = self.watermark - OVERLAP
        self.done = {u: c for u, c in self.done.items() if c.when >= horizon}

    def retrying(self) -> Iterable[tuple[str, Pending]]:
        """(instance, its Pending) of every instance awaiting a retry."""
        return [(u, p) for u, p in self.pending.items() if p.attempts]
