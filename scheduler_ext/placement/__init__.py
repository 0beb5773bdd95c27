"""Placement: value types, the one query type, allocation arithmetic, the
client protocols and their backends (embedded, HTTP, SQL snapshot).

Nothing here imports another layer of scheduler-ext.
"""

from scheduler_ext.placement.client import CandidatesEndpoint, PlacementClient
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.model import (
    DEVICE_CLASSES, SHARING_TRAIT, WHOLE_DEVICE_TRAIT, AllocationWrite,
    Allocations, ConsumerAllocations,
    FleetSnapshot, Inventory, Provider, ProviderRecord)

__all__ = [
    "DEVICE_CLASSES", "SHARING_TRAIT", "WHOLE_DEVICE_TRAIT", "AllocationWrite", "Allocations",
    "CandidatesEndpoint",
    "ConsumerAllocations", "EmbeddedPlacement", "FleetSnapshot", "Inventory",
    "PlacementClient", "Provider", "ProviderRecord",
]
