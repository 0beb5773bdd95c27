"""An in-memory placement with the real service's semantics.

It serves the default run (no services) and the fast unit tests, and is
held to the real ``openstack-placement`` by the differential tests in
``tests/functional``. Behaviour copied from placement 16.0.0 at microversion
1.39, including its corner cases:

* a write first drops every named consumer's allocations, then checks each
  row's min/max/step and, summed per (provider, class), the float capacity
  ``(total - reserved) * allocation_ratio``; an already over-full provider
  accepts a write that does not raise its usage;
* the write bumps the generation of every provider named in the new rows
  (or, for an emptied consumer, in its old rows) and of every such consumer,
  and deletes consumers left without allocations;
* a consumer is created (generation 0) before the providers are looked up,
  so a write naming an unknown provider (400) leaves that consumer behind,
  as placement does; any later failure removes it again;
* likewise ``allocations: {}`` for a consumer placement does not know writes
  no rows, so it leaves a record at generation 0 that reads back as "no
  allocations" yet refuses a null generation;
* ``DELETE /allocations`` bumps no provider generation;
* setting the traits a provider already has bumps nothing; setting
  aggregates or inventories always bumps, even when nothing changed;
* deleting a provider checks for children (cannot_delete_parent) before
  allocations (resource_provider.inuse); an unknown provider is a 404
  without an error code (``placement.resource_provider.not_found`` only
  comes from placement's reshaper);
* input our own checks refuse (``validation``) is answered as placement
  answers it: a 400 ``InvalidRequest``.

Beyond placement's API it keeps, per provider, the consumers holding
allocations there (reads cost what the provider holds, not the whole
placement), a change feed (``ChangeFeed``: a numbered log of the providers
and consumers every call changed) and ``snapshot`` of some providers.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid as uuidlib
from typing import Any, Iterable, Mapping

from scheduler_ext import errors
from scheduler_ext.placement import validation, write_capacity
from scheduler_ext.placement.change_log import ChangeLog, Changes
from scheduler_ext.placement.ledger import AllocationLedger
from scheduler_ext.placement.validation import answered_as_placement
from scheduler_ext.placement.model import (
    SHARING_TRAIT, AllocationWrite, ConsumerAllocations, FleetSnapshot,
    Inventory, Provider, ProviderRecord)


@dataclasses.dataclass
class _Provider:
    uuid: str
    name: str
    parent: str | None
    root: str
    generation: int = 0
    inventories: dict[str, Inventory] = dataclasses.field(default_factory=dict)
    traits: frozenset[str] = frozenset()
    aggregates: frozenset[str] = frozenset()

    def public(self) -> Provider:
        return Provider(self.uuid, self.name, self.generation, self.root, self.parent)


@dataclasses.dataclass
class _Consumer:
    project_id: str
    user_id: str
    consumer_type: str
    generation: int = 0
    # rp uuid -> rc -> amount; insertion order is placement's row order
    allocations: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)


class EmbeddedPlacement:
    """In-memory placement implementing ``PlacementClient``. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._providers: dict[str, _Provider] = {}
        self._consumers: dict[str, _Consumer] = {}
        self._custom_rcs: set[str] = set()
        self._custom_traits: set[str] = set()
        self._names: dict[str, str] = {}        # provider name -> uuid
        self._changes = ChangeLog()
        # usage and holders per provider, equal to the consumers' allocations
        self._ledger = AllocationLedger(self._changes)

    # ------------------------------------------------------------ helpers
    @staticmethod
    def _get(table: dict, key: str, field: str) -> Any:
        """``table[key]`` or None; keys are canonical uuids: only a key not
        found is checked (400 if no uuid) and normalized."""
        found = table.get(key) if type(key) is str else None
        return found if found is not None else table.get(validation.uuid(key, field))

    def _provider(self, rp_uuid: str) -> _Provider:
        prov = self._get(self._providers, rp_uuid, "resource_provider_uuid")
        if prov is None:    # 404 without an error code, as placement
            raise errors.NotFound(f"resource provider {rp_uuid.lower()} not found")
        return prov

    def _known_rc(self, rc: str) -> bool:
        return not rc.startswith("CUSTOM_") or rc in self._custom_rcs

    def _known_trait(self, name: str) -> bool:
        return not name.startswith("CUSTOM_") or name in self._custom_traits

    @staticmethod
    def _check_generation(prov: _Provider, generation: int) -> None:
        validation.generation(generation, "resource_provider_generation")
        if prov.generation != generation:
            raise errors.ConcurrentUpdate(
                f"resource provider {prov.uuid} generation conflict: "
                f"expected {prov.generation}, got {generation}")

    # -------------------------------------------------------- change feed
    def change_position(self) -> int:
        """The change feed's position now (see ``ChangeFeed``)."""
        with self._lock:
            return self._changes.position

    def changes_since(self, position: int) -> Changes:
        """Providers and consumers changed after ``position``."""
        with self._lock:
            return self._changes.since(position)

    # ---------------------------------------------------------- providers
    def list_providers(self) -> list[Provider]:
        with self._lock:
            return [p.public() for p in self._providers.values()]

    @answered_as_placement
    def list_sharing_providers(self, aggregates: Iterable[str]) -> list[Provider]:
        aggs = validation.names(aggregates, validation.uuid, "aggregates")
        with self._lock:
            return [p.public() for p in self._providers.values()
                    if SHARING_TRAIT in p.traits and p.aggregates & aggs]

    @answered_as_placement
    def get_provider(self, rp_uuid: str) -> Provider:
        with self._lock:
            return self._provider(rp_uuid).public()

    @answered_as_placement
    def create_provider(self, name: str, uuid: str | None = None,
                        parent_provider_uuid: str | None = None) -> Provider:
        name = validation.provider_name(name)
        rp_uuid = validation.uuid(uuid, "uuid") if uuid else str(uuidlib.uuid4())
        with self._lock:
            parent = None
            if parent_provider_uuid is not None:
                parent_provider_uuid = validation.uuid(
                    parent_provider_uuid, "parent_provider_uuid")
                parent = self._providers.get(parent_provider_uuid)
                if parent is None:
                    raise errors.InvalidRequest(
                        f"parent provider {parent_provider_uuid} does not exist",
                        field="parent_provider_uuid", value=parent_provider_uuid)
            if rp_uuid in self._providers:
                raise errors.Conflict(f"provider uuid {rp_uuid} already exists",
                                      code=errors.DUPLICATE_NAME)
            if name in self._names:
                raise errors.Conflict(f"provider name {name!r} already exists",
                                      code=errors.DUPLICATE_NAME)
            prov = _Provider(rp_uuid, name, parent_provider_uuid,
                             parent.root if parent else rp_uuid)
            self._providers[rp_uuid] = prov
            self._names[name] = rp_uuid
            self._changes.provider(rp_uuid)
            return prov.public()

    @answered_as_placement
    def delete_provider(self, rp_uuid: str) -> None:
        with self._lock:
            prov = self._provider(rp_uuid)
            # placement tests for children before allocations
            if any(p.parent == prov.uuid for p in self._providers.values()):
                raise errors.Conflict(f"provider {prov.uuid} has children",
                                      code=errors.PROVIDER_CANNOT_DELETE_PARENT)
            if self._ledger.in_use(prov.uuid):
                raise errors.InUse(f"provider {prov.uuid} has allocations",
                                   code=errors.PROVIDER_IN_USE)
            del self._providers[prov.uuid]
            del self._names[prov.name]
            self._ledger.forget_provider(prov.uuid)

    @answered_as_placement
    def create_resource_class(self, name: str) -> None:
        name = validation.custom_name(name, "resource_class")
        with self._lock:
            self._custom_rcs.add(name)

    @answered_as_placement
    def create_trait(self, name: str) -> None:
        name = validation.custom_name(name, "trait")
        with self._lock:
            self._custom_traits.add(name)

    @answered_as_placement
    def get_inventories(self, rp_uuid: str) -> tuple[int, dict[str, Inventory]]:
        with self._lock:
            prov = self._provider(rp_uuid)
            return prov.generation, dict(prov.inventories)

    @answered_as_placement
    def set_inventories(self, rp_uuid: str, generation: int,
                        inventories: Mapping[str, Inventory]) -> int:
        invs = validation.inventories(inventories)
        with self._lock:
            prov = self._provider(rp_uuid)
            self._check_generation(prov, generation)
            for rc in invs:
                if not self._known_rc(rc):
                    raise errors.InvalidRequest(
                        f"unknown resource class {rc} in inventory of {prov.uuid}",
                        field="resource_class", value=rc)
            for rc in sorted(set(prov.inventories) - set(invs)):
                if self._ledger.used(prov.uuid, rc):
                    raise errors.InUse(
                        f"cannot remove {rc} inventory of {prov.uuid}: "
                        f"{self._ledger.used(prov.uuid, rc)} in use",
                        code=errors.INVENTORY_INUSE)
            prov.inventories = invs
            prov.generation += 1
            self._changes.provider(prov.uuid)
            return prov.generation

    @answered_as_placement
    def get_traits(self, rp_uuid: str) -> tuple[int, frozenset[str]]:
        with self._lock:
            prov = self._provider(rp_uuid)
            return prov.generation, prov.traits

    @answered_as_placement
    def set_traits(self, rp_uuid: str, generation: int,
                   traits: Iterable[str]) -> int:
        names = validation.names(traits, validation.trait, "traits")
        with self._lock:
            prov = self._provider(rp_uuid)
            self._check_generation(prov, generation)
            unknown = sorted(t for t in names if not self._known_trait(t))
            if unknown:
                raise errors.InvalidRequest(f"no such trait(s): {', '.join(unknown)}",
                                            field="traits", value=unknown)
            if names != prov.traits:    # an unchanged set bumps nothing
                prov.traits = names
                prov.generation += 1
                self._changes.provider(prov.uuid)
            return prov.generation

    @answered_as_placement
    def get_aggregates(self, rp_uuid: str) -> tuple[int, frozenset[str]]:
        with self._lock:
            prov = self._provider(rp_uuid)
            return prov.generation, prov.aggregates

    @answered_as_placement
    def set_aggregates(self, rp_uuid: str, generation: int,
                       aggregates: Iterable[str]) -> int:
        aggs = validation.names(aggregates, validation.uuid, "aggregates")
        with self._lock:
            prov = self._provider(rp_uuid)
            self._check_generation(prov, generation)
            prov.aggregates = aggs
            prov.generation += 1
            self._changes.provider(prov.uuid)
            return prov.generation

    # -------------------------------------------------------- allocations
    @answered_as_placement
    def get_usages(self, rp_uuid: str) -> dict[str, int]:
        with self._lock:
            prov = self._provider(rp_uuid)
            return {rc: self._ledger.used(prov.uuid, rc) for rc in prov.inventories}

    @answered_as_placement
    def get_consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        with self._lock:
            cons = self._get(self._consumers, consumer_uuid, "consumer_uuid")
            if cons is None or not cons.allocations:
                return ConsumerAllocations({})
            return ConsumerAllocations(
                {rp: dict(res) for rp, res in cons.allocations.items()},
                cons.generation, cons.project_id, cons.user_id, cons.consumer_type)

    @answered_as_placement
    def get_provider_allocations(self, rp_uuid: str) -> dict[str, dict[str, int]]:
        with self._lock:
            prov = self._provider(rp_uuid)
            return {c: dict(self._consumers[c].allocations[prov.uuid])
                    for c in self._ledger.holders(prov.uuid)}

    @answered_as_placement
    def put_allocations(self, consumer_uuid: str, write: AllocationWrite) -> None:
        self.post_allocations({consumer_uuid: write})

    @answered_as_placement
    def post_allocations(self, writes: Mapping[str, AllocationWrite]) -> None:
        if not isinstance(writes, Mapping) or not writes:
            raise validation.bad("allocations", writes,
                                 "must name at least one consumer")
        checked = dict(validation.allocation_write(c, w) for c, w in writes.items())
        with self._lock:
            created = self._ensure_consumers(checked)
            for write in checked.values():
                for rp in write.allocations:
                    if rp not in self._providers:
                        # placement keeps the consumers created above here
                        raise errors.InvalidRequest(
                            f"allocation for resource provider {rp} that does "
                            "not exist", field="resource_provider", value=rp)
            try:
                self._replace_all(checked)
            except errors.PlacementError:
                for c in created:
                    self._consumers.pop(c, None)
                raise

    @answered_as_placement
    def delete_allocations(self, consumer_uuid: str) -> None:
        consumer_uuid = validation.uuid(consumer_uuid, "consumer_uuid")
        with self._lock:
            cons = self._consumers.get(consumer_uuid)
            if cons is None or not cons.allocations:
                raise errors.NotFound(f"no allocations for consumer {consumer_uuid}")
            self._ledger.apply(consumer_uuid, cons.allocations, -1)
            del self._consumers[consumer_uuid]

    @answered_as_placement
    def snapshot(self, uuids: Iterable[str] | None = None) -> FleetSnapshot:
        """Every provider, or those of ``uuids`` (unknown ones left out)."""
        with self._lock:
            provs = self._providers.values() if uuids is None else [
                p for u in uuids if (p := self._get(self._providers, u, "uuid"))]
            return FleetSnapshot(tuple(
                ProviderRecord(p.public(), dict(p.inventories), {
                    rc: self._ledger.used(p.uuid, rc) for rc in p.inventories},
                    p.traits, p.aggregates)
                for p in provs), frozenset(self._custom_traits), frozenset(self._custom_rcs))

    # ------------------------------------------------------ write internals
    def _ensure_consumers(self, checked: Mapping[str, AllocationWrite]) -> list[str]:
        """Check consumer generations, creating unknown consumers; on a
        conflict the consumers created here are removed again."""
        created: list[str] = []
        for c, write in checked.items():
            cons = self._consumers.get(c)
            expected = cons.generation if cons else None
            if write.consumer_generation != expected:
                for new in created:
                    del self._consumers[new]
                raise errors.ConcurrentUpdate(
                    f"consumer generation conflict for {c}: expected "
                    f"{'null' if expected is None else expected}, got "
                    f"{'null' if write.consumer_generation is None else write.consumer_generation}")
            if cons is None:
                self._consumers[c] = _Consumer(write.project_id, write.user_id,
                                               write.consumer_type)
                created.append(c)
        return created

    def _replace_all(self, checked: Mapping[str, AllocationWrite]) -> None:
        """Placement's ``_set_allocations``: check every row against the
        usage left once the named consumers' allocations are dropped, then
        commit all or nothing."""
        old = {c: self._consumers[c].allocations for c in checked}
        rows = write_capacity.rows(checked, old)
        for _, _, rc, _ in rows:
            if not self._known_rc(rc):
                raise errors.InvalidRequest(
                    f"unable to allocate inventory: no such resource class {rc}",
                    field="resource_class", value=rc)
        write_capacity.check(
            rows, self._ledger.usage, old,
            {rp: self._providers[rp].inventories for _, rp, _, _ in rows})
        for c, allocs in old.items():
            self._ledger.apply(c, allocs, -1)
        for c, write in checked.items():    # validation copied the rows
            cons = self._consumers[c]
            cons.project_id, cons.user_id = write.project_id, write.user_id
            cons.consumer_type = write.consumer_type
            cons.allocations = write.allocations  # type: ignore[assignment]
            self._ledger.apply(c, cons.allocations, +1)
        for rp in dict.fromkeys(rp for _, rp, _, _ in rows):
            self._providers[rp].generation += 1
        for c in dict.fromkeys(c for c, _, _, _ in rows):
            self._consumers[c].generation += 1
            if not self._consumers[c].allocations:
                del self._consumers[c]
