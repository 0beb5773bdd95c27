"""A provider's set-up (inventories, traits, aggregates, place in its
tree) reduced to one integer, so a refresh can tell "only usage changed"
(an allocation write bumped the generation) from a set-up change without
comparing arrays."""

from __future__ import annotations

from scheduler_ext.placement.model import ProviderRecord


def setup_key(record: ProviderRecord) -> int:
    """A 64-bit hash of everything in ``record`` but usage and generation
    (never 0: 0 means "unknown"). Python's hash: valid in this process."""
    p = record.provider
    key = hash((tuple(sorted(record.inventories.items())), record.traits,
                record.aggregates, p.parent_provider_uuid, p.root_provider_uuid))
    return key or 1
