"""The engine's view of placement: a ``CapacityIndex`` kept as a cache.

Placement does not bump a provider's generation when allocations leave it
(``DELETE /allocations``, or a consumer's allocations replaced by ones
elsewhere), so a refresh re-indexes by generation (inventories, traits,
aggregates) and corrects usage by value. A stale row only costs a failed
claim and a retry: placement's atomic write is the truth.
"""

from __future__ import annotations

import time
from typing import Iterable

from oslo_config import cfg

from scheduler_ext import errors
from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.placement import PlacementClient
from scheduler_ext.placement.client import ChangeFeed, read_provider
from scheduler_ext.placement.sql_snapshot import SqlSnapshot


class FleetView:
    """Every provider of placement in a ``CapacityIndex``, re-read by
    ``refresh`` (through the API, or placement's database with
    ``snapshot_source = sql``) and by ``changed`` for providers we wrote."""

    def __init__(self, client: PlacementClient, conf: cfg.ConfigOpts):
        opts = conf.scheduler_ext
        self.client = client
        self.refresh_interval = opts.refresh_interval
        self._read_at = time.monotonic()
        self.sql = None
        # a placement with a change feed (the embedded one) says which
        # providers changed: a refresh re-reads only those
        self.feed = client if isinstance(client, ChangeFeed) else None
        self.feed_position = self.feed.change_position() if self.feed else 0
        if opts.snapshot_source == "sql":
            if not opts.placement_database_connection:
                raise errors.ConfigError(
                    "[scheduler_ext] snapshot_source = sql needs "
                    "placement_database_connection",
                    option="placement_database_connection")
            self.sql = SqlSnapshot(opts.placement_database_connection)
        snap = self.sql.snapshot() if self.sql else client.snapshot()
        self.index = CapacityIndex.from_snapshot(
            snap, single_precision_ratio=opts.allocation_ratio_storage == "single")

    def refresh(self) -> None:
        """Bring the index up to date with placement (unless it was read
        less than ``refresh_interval`` seconds ago)."""
        now = time.monotonic()
        if self.refresh_interval and now - self._read_at < self.refresh_interval:
            return
        self._read_at = now
        if self.sql is None and self.feed is not None and self.refresh_changed():
            return
        if self.sql is None:
            # sync re-indexes by generation and corrects usage by value
            self.index.sync(self.client.snapshot())
            return
        gens = self.sql.generations()
        moved = [u for u, g in gens.items() if self.index.generation(u) != g]
        for record in self.sql.snapshot(moved).providers:
            self.index.refresh_provider(record)
        for u in [u for u in self.index.row_of if u not in gens]:
            self.index.remove_provider(u)
        self.index.replace_usages(self.sql.usage_rows())

    def refresh_changed(self) -> bool:
        """Re-read the providers the change feed names; False (nothing
        done) when the feed no longer reaches back to our position."""
        assert self.feed is not None
        changes = self.feed.changes_since(self.feed_position)
        if changes.providers is None:
            # too far behind: the full re-read below, from a position taken
            # before it (what changes meanwhile is read again next time)
            self.feed_position = changes.position
            return False
        self.feed_position = changes.position
        self.reread(changes.providers)
        return True

    def changed(self, providers: Iterable[str]) -> None:
        """Re-read these providers (we wrote allocations on them). With a
        change feed, whatever changed since the last read instead: the
        index is current for every provider the feed does not name."""
        if self.feed is not None and self.refresh_changed():
            return
        self.reread(providers)

    def reread(self, providers: Iterable[str]) -> None:
        """Re-read these providers from the API."""
        for rp in dict.fromkeys(providers):
            try:
                record = read_provider(self.client, rp)
            except errors.NotFound:
                self.index.remove_provider(rp)
                continue
            self.index.refresh_provider(record)
