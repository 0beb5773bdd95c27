"""The engine's view of placement: a ``CapacityIndex`` kept as a cache
whose per-request upkeep costs what changed, not the fleet.

Three paths write the index, each with its own rule:

* ``refresh`` (request path, before each decision): the change source's
  ``poll``, which reports every increase since the last poll (see
  ``changes.py``); nothing O(fleet) happens there with the sql source,
  whose poll is one statement and brings the usage of the providers
  written (``IndexUpdate.usage``: their set-up waits for the re-read);
* ``changed`` (our own claims and releases): the providers written are
  re-read at once;
* the background re-read (its own thread, every ``reread_interval``
  seconds, one at a time, started when a decision has been answered
  (``reread_if_due``), so that it runs between decisions rather than
  beside the one that found it due): the full usage table and the providers whose
  generation moved, added or deleted. Placement bumps no generation when
  allocations leave a provider, so decreases arrive here. It never holds
  the index lock while reading, and providers the other two paths wrote
  while it read keep their newer values.

So the view may be conservative (count usage placement has already freed)
until the next re-read, and is optimistic only where a change hid from the
poll; a claim placement refuses re-reads the provider (``changed``), so no
provider stays optimistic past one failed claim. A conservative view never
says "no host" on its own: when it finds none, ``recheck`` re-reads the
providers placement would offer and the engine looks again.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Iterable, cast

from oslo_config import cfg
from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.placement import Allocations, PlacementClient, allocations
from scheduler_ext.placement.query import CandidateRequest
from scheduler_ext.placement.sql_snapshot import OPTION, SqlSnapshot
from scheduler_ext.placement.client import CandidatesEndpoint, ChangeFeed
from scheduler_ext.placement.model import ConsumerAllocations
from scheduler_ext.sources.changes import (ApiChanges, ChangeFeedClient, IndexUpdate,
                                           ChangeSource, FeedChanges)
from scheduler_ext.sources.base import FleetUpkeep
from scheduler_ext.sources.sql_changes import SqlChanges

LOG = logging.getLogger(__name__)

#: A full read over the API slower than this (seconds) is warned about.
SLOW_API_READ = 1.0


def checked_database(conf: cfg.ConfigOpts) -> SqlSnapshot | None:
    """Placement's database when ``[scheduler_ext] snapshot_source`` reads
    it (``auto``: when ``placement_database_connection`` is set), read
    once: an unreachable one is a ConfigError naming the option and the
    host. None when the source is the API."""
    opts = conf.scheduler_ext
    kind = opts.snapshot_source
    if kind == "auto":
        kind = "sql" if opts.placement_database_connection else "api"
    if kind == "api":
        return None
    if not opts.placement_database_connection:
        raise errors.ConfigError(
            f"[scheduler_ext] snapshot_source = sql needs {OPTION}", option=OPTION)
    sql = SqlSnapshot(opts.placement_database_connection)
    sql.check()
    return sql


def choose_source(client: PlacementClient, conf: cfg.ConfigOpts) -> ChangeSource:
    """The change source ``[scheduler_ext] snapshot_source`` names, its
    database checked (``checked_database``). A client that offers a change
    feed (the embedded placement) is read through it (``FeedChanges``: what
    the feed names, exactly)."""
    sql = checked_database(conf)
    if sql is not None:
        return SqlChanges(sql)
    if isinstance(client, ChangeFeed):
        # the embedded placement: the one change feed, whose snapshot
        # also reads some providers
        return FeedChanges(cast(ChangeFeedClient, client))
    return ApiChanges(client)


class FleetView:
    """Every provider of placement in a ``CapacityIndex`` (see the module
    docstring): the engine source's ``FleetUpkeep``. Built with one full read (log: source, seconds, fleet
    size); thread-safe."""

    #: the slow-API warning is given once per process
    warned_slow_api = False

    def __init__(self, client: PlacementClient, conf: cfg.ConfigOpts,
                 source: ChangeSource | None = None):
        opts = conf.scheduler_ext
        self.client = client
        self.refresh_interval = opts.refresh_interval
        self.reread_interval = opts.reread_interval
        self.source = source or choose_source(client, conf)
        self._lock = threading.Lock()          # poll / read / apply
        self._reread_lock = threading.Lock()   # one background re-read
        self._touched: set[str] | None = None  # written during a re-read
        self.stats = {"polls": 0, "polled_providers": 0, "own_writes": 0,
                      "rereads": 0, "fallbacks": 0, "rechecks": 0,
                      "last_poll_s": 0.0, "last_reread_s": 0.0}
        started = time.monotonic()
        snap = self._full_read(conf)
        self.full_read_s = time.monotonic() - started
        self.index = CapacityIndex.from_snapshot(
            snap, single_precision_ratio=opts.allocation_ratio_storage == "single")
        self._prepare()
        self._read_at = self._reread_at = time.monotonic()
        self._log_start()

    def _full_read(self, conf: cfg.ConfigOpts):
        try:
            return self.source.full_read()
        except errors.PlacementUnavailable as exc:
            if isinstance(self.source, SqlChanges):
                raise errors.ConfigError(
                    f"[scheduler_ext] {OPTION}: cannot read placement's "
                    f"database at {self.source.sql.where}: {exc}",
                    option=OPTION, value=self.source.sql.where) from exc
            raise

    def _log_start(self) -> None:
        n = len(self.index)
        LOG.info("fleet view: source %s, full read of %d providers "
                 "(%d resource classes) in %.3f s", self.source.name, n,
                 len(self.index.columns), self.full_read_s)
        if (self.source.name == "api" and self.full_read_s > SLOW_API_READ
                and not FleetView.warned_slow_api):
            FleetView.warned_slow_api = True
            LOG.warning(
                "*** fleet view: reading %d providers through placement's "
                "API took %.1f s. Every scheduling request re-reads every "
                "provider's generation over the API, and decreases need one "
                "GET per provider. Set [scheduler_ext] %s to placement's "
                "database URL (read-only is enough) to read it with SQL. ***",
                n, self.full_read_s, OPTION)

    # -------------------------------------------------------- request path
    def refresh(self) -> None:
        """Take in every increase since the last call (unless the view was
        refreshed less than ``refresh_interval`` seconds ago). Never waits
        for a re-read."""
        now = time.monotonic()
        if not self.refresh_interval or now - self._read_at >= self.refresh_interval:
            self._read_at = now
            with self._lock:
                changes = self._guarded(lambda: self.source.poll(self.index))
                self._apply(changes)
            self.stats["polls"] += 1
            self.stats["polled_providers"] += len(changes.providers)
            self.stats["last_poll_s"] = time.monotonic() - now

    def reread_if_due(self) -> bool:
        """Start the background re-read if ``reread_interval`` seconds have
        passed since the last one began; what a decision calls once it is
        answered. At 50,000 providers a re-read takes 1 to 2 s of the
        process's time (and its garbage collections): started beside a
        decision, it slowed that decision several-fold. True if started."""
        if not self.reread_interval or \
                time.monotonic() - self._reread_at < self.reread_interval:
            return False
        return self.start_reread()

    def after_decision(self) -> None:
        """The upkeep due once a decision is answered: the background
        re-read, when due (``reread_if_due``)."""
        self.reread_if_due()

    def root_of(self, allocs: Allocations) -> str | None:
        """The one root the non-sharing providers of ``allocs`` belong to
        in the view (``CapacityIndex.root_of``)."""
        return self.index.root_of(allocs)

    def consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        """What one consumer holds, read through the change source (one
        statement on placement's database with the sql source); the view
        itself is not touched."""
        return self._guarded(lambda: self.source.consumer(consumer_uuid))

    def changed(self, providers: Iterable[str]) -> None:
        """Re-read these providers now (we wrote allocations on them, or a
        claim on them was refused)."""
        wanted = list(dict.fromkeys(providers))
        if not wanted:
            return
        with self._lock:
            self._apply(self._guarded(lambda: self.source.read(wanted)))

    def wrote(self, before: Allocations, after: Allocations) -> None:
        """Our own accepted write enters the view at once, as the usage it
        added and removed (no read: the next poll sees its allocation rows
        and takes those providers' usage from placement). A provider or
        class the view does not hold is re-read instead."""
        delta = allocations.add(allocations.copy(after), before, -1)
        grown = {rp: {rc: n for rc, n in res.items() if n > 0}
                 for rp, res in delta.items()}
        shrunk = {rp: {rc: -n for rc, n in res.items() if n < 0}
                  for rp, res in delta.items()}
        with self._lock:
            missing = self.index.apply(allocations.copy(grown)) + \
                self.index.apply(allocations.copy(shrunk), -1)
            if self._touched is not None:     # a re-read keeps these
                self._touched |= set(delta)
        self.stats["own_writes"] += 1
        if missing:
            self.changed(rp for rp, _ in missing)

    def recheck(self, query: CandidateRequest, limit: int,
                also: Iterable[str] = ()) -> bool:
        """The view found no host for ``query``: before that answer stands,
        re-read what a decrease the poll cannot see may have freed. That is
        the providers of placement's first ``limit`` allocation candidates
        for the query (one ``GET /allocation_candidates``, what stock nova
        asks on every request) and ``also`` (a move's source and old
        providers). True when anything was re-read. A change feed is exact
        and a client without the candidates endpoint cannot be asked:
        nothing to do (False). A placement error here is logged, not
        raised: the view's own answer stands."""
        if isinstance(self.source, FeedChanges):
            return False
        wanted = set(also)
        if isinstance(self.client, CandidatesEndpoint):
            try:
                answer = self.client.allocation_candidates(
                    query.replace(limit=limit).to_query())
            except errors.SchedulerExtError as exc:
                LOG.warning("fleet view: placement's allocation candidates "
                            "for a recheck failed: %s", exc)
            else:
                for req in answer.get("allocation_requests", ()):
                    wanted |= set(req.get("allocations", {}))
        if not wanted:
            return False
        self.stats["rechecks"] += 1
        self.changed(wanted)
        return True

    def _apply(self, changes: IndexUpdate) -> None:
        changes.apply_to(self.index)
        if self._touched is not None:
            self._touched |= changes.providers

    def _guarded(self, read):
        """``read()``; when the database is lost, fall back to the api
        source (with a warning) and read again through it."""
        try:
            return read()
        except errors.PlacementUnavailable as exc:
            if not isinstance(self.source, SqlChanges):
                raise
            LOG.warning("fleet view: placement's database at %s cannot be "
                        "read (%s); falling back to placement's API for the "
                        "rest of this process", self.source.sql.where, exc)
            self.source = ApiChanges(self.client)
            self.stats["fallbacks"] += 1
            return read()

    # ------------------------------------------------------------- re-read
    def start_reread(self) -> bool:
        """Start a background re-read unless one is running; True if
        started."""
        if not self._reread_lock.acquire(blocking=False):
            return False
        self._reread_at = time.monotonic()
        thread = threading.Thread(target=self._reread_locked, daemon=True,
                                  name="fleet-view-reread")
        thread.start()
        return True

    def reread(self) -> None:
        """A full re-read now, in the caller's thread (waits for a running
        one first). After it the view equals placement as read."""
        self._reread_lock.acquire()
        self._reread_at = time.monotonic()
        self._reread_locked(raise_errors=True)

    def _reread_locked(self, raise_errors: bool = False) -> None:
        started = time.monotonic()
        try:
            with self._lock:
                self._touched = set()
                source = self.source
            changes = source.reread(self.index)
            with self._lock:
                self._apply_reread(changes)
            self._prepare()
            self.stats["rereads"] += 1
            self.stats["last_reread_s"] = time.monotonic() - started
        except errors.SchedulerExtError as exc:
            if raise_errors:
                raise
            LOG.warning("fleet view: background re-read failed: %s", exc)
        finally:
            with self._lock:
                self._touched = None
            self._reread_lock.release()

    def _prepare(self) -> None:
        """Build now what the next query would otherwise build on the
        request path: the index's tree structure and aggregates (O(fleet),
        about 25 ms at 100,000 providers), rebuilt when providers appeared,
        died or moved, or aggregates changed."""
        with self.index.lock:
            self.index.trees()

    def _apply_reread(self, changes: IndexUpdate) -> None:
        """Apply a re-read, except to providers written since it began."""
        changes.apply_to(self.index, keep=self._touched or frozenset())

    # --------------------------------------------------------- accounting
    def memory(self) -> dict[str, float]:
        """The index's bytes (``CapacityIndex.memory``) plus what change
        tracking keeps (``tracking``)."""
        out = dict(self.index.memory())
        out["tracking"] = self.source.tracking_bytes() + 100 * len(self._touched or ())
        return out


if TYPE_CHECKING:       # mypy checks the class against the declared contract
    _IS_AN_UPKEEP: type[FleetUpkeep] = FleetView
