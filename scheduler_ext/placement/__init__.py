"""Placement client protocol and its two backends."""

from scheduler_ext.placement.client import PlacementClient, add_allocations
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.model import (
    AllocationWrite, Allocations, ConsumerAllocations, FleetSnapshot, Inventory,
    Provider, ProviderRecord)

__all__ = [
    "AllocationWrite", "Allocations", "ConsumerAllocations", "EmbeddedPlacement",
    "FleetSnapshot", "Inventory", "PlacementClient", "Provider", "ProviderRecord",
    "add_allocations",
]
