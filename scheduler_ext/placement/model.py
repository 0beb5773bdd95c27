"""Plain value types exchanged with placement (no behaviour, no I/O)."""

from __future__ import annotations

import dataclasses
from typing import Mapping

#: Largest integer placement stores (a signed 32-bit column).
MAX_INT = 2**31 - 1

#: The trait that makes a provider share its inventory with its aggregates.
SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"

#: The trait nova's compute puts on a provider that is one PCI device it
#: assigns whole to one server (``[pci] report_in_placement``): the old and
#: new flavor of a same-host resize can never share such a device.
WHOLE_DEVICE_TRAIT = "COMPUTE_MANAGED_PCI_DEVICE"

#: Classes of devices nova assigns to one server from a provider that holds
#: several: a pGPU's vGPUs. Nova's libvirt driver creates the new flavor's
#: mediated devices while the old ones stay assigned, so the old and new
#: flavor of a same-host resize never share them either.
DEVICE_CLASSES = frozenset({"VGPU"})

#: rp uuid -> resource class -> amount (whole units of the class).
Allocations = Mapping[str, Mapping[str, int]]
#: The same, writable: what the arithmetic of ``allocations`` returns and
#: what ``allocations.add`` changes in place.
WritableAllocations = dict[str, dict[str, int]]


@dataclasses.dataclass(frozen=True)
class Inventory:
    """One resource class on one provider, as placement stores it.

    ``capacity`` is placement's write-path capacity: the float product
    ``(total - reserved) * allocation_ratio`` (not truncated).
    """

    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = MAX_INT
    step_size: int = 1
    allocation_ratio: float = 1.0

    @property
    def capacity(self) -> float:
        return (self.total - self.reserved) * self.allocation_ratio

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Provider:
    """A resource provider's identity and generation."""

    uuid: str
    name: str
    generation: int
    root_provider_uuid: str
    parent_provider_uuid: str | None = None


@dataclasses.dataclass(frozen=True)
class AllocationWrite:
    """What one consumer should hold after a write (PUT/POST semantics).

    ``consumer_generation`` is ``None`` for a consumer placement does not
    know yet, else the generation last read; an empty ``allocations``
    deletes everything the consumer holds.
    """

    allocations: Allocations
    project_id: str
    user_id: str
    consumer_generation: int | None
    consumer_type: str = "INSTANCE"


@dataclasses.dataclass(frozen=True)
class ConsumerAllocations:
    """A consumer's allocations as read back; ``generation`` is ``None`` when
    placement shows no allocations for it."""

    allocations: Allocations
    generation: int | None = None
    project_id: str | None = None
    user_id: str | None = None
    consumer_type: str | None = None

    def write(self, allocations: Allocations, *,
              consumer_type: str | None = None,
              project_id: str | None = None,
              user_id: str | None = None) -> AllocationWrite:
        """An AllocationWrite replacing this consumer's set, guarded by the
        generation read here."""
        return AllocationWrite(
            allocations=allocations,
            project_id=project_id or self.project_id or "",
            user_id=user_id or self.user_id or "",
            consumer_generation=self.generation,
            consumer_type=consumer_type or self.consumer_type or "INSTANCE")


@dataclasses.dataclass(frozen=True)
class ProviderRecord:
    """Everything the engine needs to know about one provider."""

    provider: Provider
    inventories: Mapping[str, Inventory]
    usages: Mapping[str, int]
    traits: frozenset[str]
    aggregates: frozenset[str]


@dataclasses.dataclass(frozen=True)
class FleetSnapshot:
    """A read of every provider; a cache, never the truth.

    ``custom_traits`` / ``custom_classes``: every ``CUSTOM_`` trait and
    resource class placement knows, when the source read them (None: not
    read)."""

    providers: tuple[ProviderRecord, ...]
    custom_traits: frozenset[str] | None = None
    custom_classes: frozenset[str] | None = None
