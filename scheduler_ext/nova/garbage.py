"""Dropping a decision's nova objects after its answer, not before.

nova 34 builds a HostState per candidate host for every request (up to
``max_placement_results``, 1,000 by default), each with its compute node,
service, aggregates and instances. Freeing them where the request's frames
end costs about 8 ms a decision at 1,000 hosts, paid before the answer
reaches the conductor. ``DeferredDrop`` takes the last reference and
drops it in a daemon thread, which runs while the service waits on I/O
(the next request, the claim's HTTP round trip, nova's database reads).
The work is the same; only where it falls moves. With eventlet's monkey
patching the thread is a green thread (see ``workers``).
"""

from __future__ import annotations

from typing import Any

from scheduler_ext.nova.workers import Workers


class DeferredDrop:
    """Drops what it is handed in one daemon thread, started on first use."""

    def __init__(self, name: str = "scheduler-ext-drop"):
        self.workers = Workers(name)

    def later(self, holder: list[Any]) -> None:
        """Take ``holder``'s items; they are dropped in the drop thread.
        ``holder`` is emptied here, so its owner keeps no reference."""
        if not holder:
            return
        items = holder[:]
        holder.clear()
        # clear() in the worker drops the last references to the objects
        self.workers.submit(items.clear)

    def drain(self) -> None:
        """Wait until everything handed over so far is dropped (tests)."""
        self.workers.drain()
