"""A numbered log of what a placement changed: providers and consumers.

The embedded placement records here every provider whose inventories,
traits, aggregates, usage or existence changed, and every consumer whose
allocations changed. A reader keeps the position it last read and asks for
what changed after it (``since``), so a cache (the engine's fleet view, the
simulator's invariant checks) costs what changed, not the fleet's size.

The log is bounded: once it holds more than ``limit`` entries the older half
is dropped, and a reader whose position fell behind the dropped part gets
``None`` (re-read everything), never a partial answer.
"""

from __future__ import annotations

import dataclasses

#: Entries kept before the older half is dropped.
DEFAULT_LIMIT = 1 << 18


@dataclasses.dataclass(frozen=True)
class Changes:
    """What changed between a reader's position and ``position`` (now).

    ``providers`` and ``consumers`` are uuids in the order they first
    changed, each once; ``None`` when the reader's position is older than
    the log keeps (re-read everything)."""

    position: int
    providers: tuple[str, ...] | None
    consumers: tuple[str, ...] | None

    @property
    def complete(self) -> bool:
        return self.providers is not None


class ChangeLog:
    """Monotonically numbered entries; not thread-safe (the owner locks)."""

    PROVIDER = 0
    CONSUMER = 1

    def __init__(self, limit: int = DEFAULT_LIMIT):
        if limit < 2:
            raise ValueError(f"limit={limit!r}: must be at least 2")
        self.limit = limit
        self.start = 0          # position of entries[0]
        self.entries: list[tuple[int, str]] = []

    @property
    def position(self) -> int:
        """The position after the newest entry."""
        return self.start + len(self.entries)

    def provider(self, rp_uuid: str) -> None:
        self._append((self.PROVIDER, rp_uuid))

    def consumer(self, consumer_uuid: str) -> None:
        self._append((self.CONSUMER, consumer_uuid))

    def _append(self, entry: tuple[int, str]) -> None:
        self.entries.append(entry)
        if len(self.entries) > self.limit:
            drop = len(self.entries) // 2
            del self.entries[:drop]
            self.start += drop

    def since(self, position: int) -> Changes:
        """What changed after ``position`` (a value of ``position`` read
        earlier); a position ahead of the log counts as "nothing"."""
        now = self.position
        if position < self.start:
            return Changes(now, None, None)
        providers: dict[str, None] = {}
        consumers: dict[str, None] = {}
        for kind, uuid in self.entries[max(0, position - self.start):]:
            (providers if kind == self.PROVIDER else consumers)[uuid] = None
        return Changes(now, tuple(providers), tuple(consumers))
