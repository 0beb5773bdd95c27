"""The placement client protocol: what the scheduler reads and writes.

``CandidatesEndpoint`` is the part only a real placement has. Two backends
implement the client: ``EmbeddedPlacement`` (in memory, placement's
semantics, for the default run and unit tests) and ``HttpPlacement`` (a real
placement through keystoneauth1). Both validate input the same way before
anything changes and raise the typed errors of ``scheduler_ext.errors``.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Protocol, runtime_checkable

from scheduler_ext import errors
from scheduler_ext.placement.change_log import Changes
from scheduler_ext.placement.model import (
    DEVICE_CLASSES, WHOLE_DEVICE_TRAIT, AllocationWrite, Allocations,
    ConsumerAllocations, FleetSnapshot, Inventory, Provider, ProviderRecord)


@runtime_checkable
class PlacementClient(Protocol):
    # --- providers and their set-up -------------------------------------
    def list_providers(self) -> list[Provider]: ...

    def list_sharing_providers(self, aggregates: Iterable[str]) -> list[Provider]:
        """The providers with ``SHARING_TRAIT`` in any of ``aggregates``
        (none when ``aggregates`` is empty)."""

    def get_provider(self, rp_uuid: str) -> Provider: ...

    def create_provider(self, name: str, uuid: str | None = None,
                        parent_provider_uuid: str | None = None) -> Provider: ...

    def delete_provider(self, rp_uuid: str) -> None: ...

    def create_resource_class(self, name: str) -> None:
        """Create a ``CUSTOM_*`` class; no error if it exists."""

    def create_trait(self, name: str) -> None:
        """Create a ``CUSTOM_*`` trait; no error if it exists."""

    def get_inventories(self, rp_uuid: str) -> tuple[int, dict[str, Inventory]]:
        """(provider generation, inventories by class)."""

    def set_inventories(self, rp_uuid: str, generation: int,
                        inventories: Mapping[str, Inventory]) -> int:
        """Replace all inventories; returns the new provider generation."""

    def get_traits(self, rp_uuid: str) -> tuple[int, frozenset[str]]: ...

    def set_traits(self, rp_uuid: str, generation: int,
                   traits: Iterable[str]) -> int: ...

    def get_aggregates(self, rp_uuid: str) -> tuple[int, frozenset[str]]: ...

    def set_aggregates(self, rp_uuid: str, generation: int,
                       aggregates: Iterable[str]) -> int: ...

    # --- usage and allocations ------------------------------------------
    def get_usages(self, rp_uuid: str) -> dict[str, int]:
        """Used amount per class that has inventory (0 when unused)."""

    def get_consumer(self, consumer_uuid: str) -> ConsumerAllocations: ...

    def get_provider_allocations(self, rp_uuid: str) -> dict[str, dict[str, int]]:
        """consumer uuid -> class -> amount, on this provider."""

    def put_allocations(self, consumer_uuid: str, write: AllocationWrite) -> None:
        """Replace one consumer's allocations (PUT /allocations/{consumer})."""

    def post_allocations(self, writes: Mapping[str, AllocationWrite]) -> None:
        """Replace several consumers' allocations in one transaction."""

    def delete_allocations(self, consumer_uuid: str) -> None:
        """Delete everything a consumer holds; NotFound if it holds nothing."""

    def snapshot(self) -> FleetSnapshot:
        """Read every provider for the engine."""


@runtime_checkable
class CandidatesEndpoint(Protocol):
    """A placement that answers ``GET /allocation_candidates`` (the HTTP
    backend; the embedded one does not)."""

    def allocation_candidates(self, params: list[tuple[str, str]]) -> dict:
        """The answer body: ``allocation_requests`` and
        ``provider_summaries``."""


@runtime_checkable
class ChangeFeed(Protocol):
    """A placement that can say what changed since a reader last looked
    (the embedded one; a real placement has no such endpoint). A reader
    takes ``change_position()`` before it reads, then asks
    ``changes_since(position)``: the providers whose inventories, traits,
    aggregates, usage or existence changed and the consumers whose
    allocations changed after that position, or ``None`` for both when the
    position is older than the feed keeps (re-read everything)."""

    def change_position(self) -> int: ...

    def changes_since(self, position: int) -> Changes: ...


def read_provider(client: PlacementClient, rp_uuid: str) -> ProviderRecord:
    """One provider's record for the engine (five reads; the generation is
    the one returned with the inventories)."""
    return read_listed_provider(client, client.get_provider(rp_uuid))


def read_listed_provider(client: PlacementClient, prov: Provider) -> ProviderRecord:
    """The record of a provider known from ``list_providers`` (four reads:
    inventories with the generation, traits, aggregates, usages). NotFound
    if it was deleted meanwhile."""
    rp_uuid = prov.uuid
    gen, invs = client.get_inventories(rp_uuid)
    _, traits = client.get_traits(rp_uuid)
    _, aggs = client.get_aggregates(rp_uuid)
    return ProviderRecord(
        Provider(prov.uuid, prov.name, gen, prov.root_provider_uuid,
                 prov.parent_provider_uuid),
        invs, client.get_usages(rp_uuid), traits, aggs)


def read_listed_providers(client: PlacementClient, providers: Iterable[Provider]
                          ) -> tuple[list[ProviderRecord], list[str]]:
    """(records, uuids of providers deleted between the list and their read):
    a provider deleted meanwhile is skipped, never fatal to the read."""
    records, gone = [], []
    for prov in providers:
        try:
            records.append(read_listed_provider(client, prov))
        except errors.NotFound:
            gone.append(prov.uuid)
    return records, gone


def read_whole_devices(client: PlacementClient, allocs: Allocations) -> set[str]:
    """The providers of ``allocs`` that are devices the old and new flavor
    of a move never share: those allocated a ``DEVICE_CLASSES`` class, and
    whole devices (trait ``WHOLE_DEVICE_TRAIT``, traits read now; one
    deleted meanwhile is not one)."""
    out: set[str] = set()
    for rp, res in allocs.items():
        if DEVICE_CLASSES.intersection(res):
            out.add(rp)
            continue
        try:
            _, traits = client.get_traits(rp)
        except errors.NotFound:
            continue
        if WHOLE_DEVICE_TRAIT in traits:
            out.add(rp)
    return out
