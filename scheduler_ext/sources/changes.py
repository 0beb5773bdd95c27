"""Sources of changes: how the fleet view learns what placement changed.

A ``ChangeSource`` answers four questions, each with the fewest reads its
channel allows:

* ``full_read``: every provider (at start, and it resets the source's own
  change tracking);
* ``poll``: on the request path, before each decision. It must report
  every *increase* since the last poll (new allocations on a provider,
  inventory, trait or aggregate changes: placement bumps the provider's
  generation for all of these) and should cost what changed, not the
  fleet;
* ``read``: fresh records of named providers (the ones our own claims and
  releases just wrote);
* ``reread``: off the request path, everything a poll may miss: usage of
  every provider (placement bumps no generation when allocations *leave* a
  provider, so decreases are only seen here), providers added or deleted.

Implementations: ``ApiChanges`` (placement's REST API, here),
``SqlChanges`` (placement's database, ``sql_changes.py``) and
``FeedChanges`` (a client that says what changed: the embedded
placement's change feed).
``fleet_view.choose_source`` picks one.
"""

from __future__ import annotations

import dataclasses
from typing import Collection, Iterable, Protocol

from scheduler_ext import errors
from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.placement import PlacementClient
from scheduler_ext.placement.client import ChangeFeed, read_listed_providers
from scheduler_ext.placement.model import (ConsumerAllocations, FleetSnapshot,
                                           ProviderRecord)

class ChangeFeedClient(PlacementClient, ChangeFeed, Protocol):
    """A placement client that also offers a change feed, and a snapshot
    of some providers (``uuids``; unknown ones left out)."""

    def snapshot(self, uuids: Iterable[str] | None = None) -> FleetSnapshot: ...


#: (provider uuid, resource class, used): one row of a usage table.
UsageRow = tuple[str, str, int]


@dataclasses.dataclass
class IndexUpdate:
    """What a source found, as a write to the capacity index
    (``apply_to``). ``records`` are indexed by value (re-written
    when the generation moved, usage corrected when it did not),
    ``removed`` are providers placement no longer has, ``usage`` the
    usage of indexed providers (uuid -> class -> used; classes not listed:
    none; the indexed generation and set-up stay), ``usages`` (only from
    ``reread``) is the full usage table: providers not listed use
    nothing."""

    records: list[ProviderRecord] = dataclasses.field(default_factory=list)
    removed: list[str] = dataclasses.field(default_factory=list)
    usage: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    usages: list[UsageRow] | None = None

    @property
    def providers(self) -> set[str]:
        """Every provider these changes write (records, usage, removals)."""
        return ({r.provider.uuid for r in self.records} | set(self.removed)
                | set(self.usage))

    def apply_to(self, index: CapacityIndex,
                 keep: Collection[str] = frozenset()) -> None:
        """Write these changes into ``index`` (usage under its lock, then
        records, removals and, from a re-read, the full usage table),
        except to the providers in ``keep`` (written since a re-read
        began: they keep what they hold)."""
        if self.usage:
            index.set_usages({u: n for u, n in self.usage.items() if u not in keep}
                             if keep else self.usage)
        for record in self.records:
            if record.provider.uuid not in keep:
                index.refresh_provider(record)
        for u in self.removed:
            if u not in keep:
                index.remove_provider(u)
        if self.usages is not None:
            index.replace_usages(self.usages, keep=keep)


class ChangeSource(Protocol):
    """See the module docstring. ``name`` is what the logs call it."""

    name: str

    def full_read(self) -> FleetSnapshot: ...

    def poll(self, index: CapacityIndex) -> IndexUpdate: ...

    def read(self, uuids: Iterable[str]) -> IndexUpdate: ...

    def reread(self, index: CapacityIndex) -> IndexUpdate: ...

    def consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        """What one consumer holds, as GET /allocations/{consumer} shows
        it, read through this source's channel."""

    def tracking_bytes(self) -> int:
        """Rough bytes the source keeps to detect changes."""


class ApiChanges:
    """Placement's REST API. ``poll`` is one ``GET /resource_providers``
    (every provider with its generation: there is no cheaper way to learn
    which generations moved) plus four GETs per moved provider. ``reread``
    is one ``GET .../usages`` per provider: slow on big fleets, which is why
    it runs off the request path."""

    name = "api"

    def __init__(self, client: PlacementClient):
        self.client = client

    def full_read(self) -> FleetSnapshot:
        records, _ = read_listed_providers(self.client, self.client.list_providers())
        return FleetSnapshot(tuple(records))

    def poll(self, index: CapacityIndex) -> IndexUpdate:
        listed = self.client.list_providers()
        moved = [p for p in listed if index.generation(p.uuid) != p.generation]
        records, gone = read_listed_providers(self.client, moved)
        seen = {p.uuid for p in listed}
        return IndexUpdate(records, gone + [u for u in index.live_uuids() if u not in seen])

    def read(self, uuids: Iterable[str]) -> IndexUpdate:
        out = IndexUpdate()
        for u in dict.fromkeys(uuids):
            try:
                prov = self.client.get_provider(u)
            except errors.NotFound:
                out.removed.append(u)
                continue
            records, gone = read_listed_providers(self.client, [prov])
            out.records += records
            out.removed += gone
        return out

    def reread(self, index: CapacityIndex) -> IndexUpdate:
        out = IndexUpdate(usages=[])
        for u in index.live_uuids():
            try:
                used = self.client.get_usages(u)
            except errors.NotFound:
                out.removed.append(u)
                continue
            out.usages += [(u, rc, n) for rc, n in used.items() if n]  # type: ignore[operator]
        return out

    def consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        return self.client.get_consumer(consumer_uuid)

    def tracking_bytes(self) -> int:
        return 0


class FeedChanges:
    """A placement that says what changed (``ChangeFeed``: the embedded
    one). ``poll`` reads exactly the providers the feed names since the
    last poll, decreases included (the feed names every usage change), so
    the view is exact and costs what changed. A reader left behind the
    feed's window reads everything once."""

    name = "change-feed"

    def __init__(self, client: ChangeFeedClient):
        self.client = client
        self.position = client.change_position()

    def full_read(self) -> FleetSnapshot:
        self.position = self.client.change_position()
        return self.client.snapshot()

    def poll(self, index: CapacityIndex) -> IndexUpdate:
        news = self.client.changes_since(self.position)
        if news.providers is None:
            snap = self.full_read()
            seen = {r.provider.uuid for r in snap.providers}
            return IndexUpdate(list(snap.providers),
                           [u for u in index.live_uuids() if u not in seen])
        self.position = news.position
        return self.read(news.providers)

    def read(self, uuids: Iterable[str]) -> IndexUpdate:
        """The records of ``uuids`` in one read; those placement no longer
        has are removed."""
        wanted = list(dict.fromkeys(uuids))
        records = list(self.client.snapshot(wanted).providers)
        found = {r.provider.uuid for r in records}
        # a uuid placement knows reads back canonical: its lower case
        return IndexUpdate(records, [u for u in wanted if u.lower() not in found])

    def reread(self, index: CapacityIndex) -> IndexUpdate:
        return IndexUpdate()

    def consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        return self.client.get_consumer(consumer_uuid)

    def tracking_bytes(self) -> int:
        return 0
