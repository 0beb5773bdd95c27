"""Placement: value types, the one query type, allocation arithmetic, the
client protocols and their backends (HTTP, SQL snapshot, and the embedded
in-memory placement of the lab and the tests).

Nothing here imports another layer of scheduler-ext. The embedded
placement is imported from its own module
(``scheduler_ext.placement.embedded``), never from here, so a nova
scheduler does not load it.
"""

from scheduler_ext.placement.client import CandidatesEndpoint, PlacementClient
from scheduler_ext.placement.model import (
    DEVICE_CLASSES, SHARING_TRAIT, WHOLE_DEVICE_TRAIT, AllocationWrite,
    Allocations, ConsumerAllocations,
    FleetSnapshot, Inventory, Provider, ProviderRecord, WritableAllocations)

__all__ = [
    "DEVICE_CLASSES", "SHARING_TRAIT", "WHOLE_DEVICE_TRAIT", "AllocationWrite", "Allocations",
    "CandidatesEndpoint",
    "ConsumerAllocations", "FleetSnapshot", "Inventory",
    "PlacementClient", "Provider", "ProviderRecord", "WritableAllocations",
]
