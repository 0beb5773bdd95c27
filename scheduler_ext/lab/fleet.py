"""Build a fleet of compute nodes (and sharing storage) on any placement.

Used by ``scheduler-ext simulate``, the benchmarks and the tests; works the
same on the embedded and on a real placement.
"""

from __future__ import annotations

import dataclasses
import random
import uuid as uuidlib
from typing import Mapping

from scheduler_ext.placement import Inventory, PlacementClient
from scheduler_ext.placement.model import SHARING_TRAIT



@dataclasses.dataclass(frozen=True)
class Fleet:
    """Provider uuids of a built fleet: compute nodes and sharing providers,
    and the aggregate each sharing provider serves."""

    hosts: tuple[str, ...]
    sharing: tuple[str, ...]
    aggregates: Mapping[str, str]   # sharing provider -> aggregate uuid


def add_host(client: PlacementClient, name: str,
             inventories: Mapping[str, Inventory],
             aggregates: tuple[str, ...] = (), traits: tuple[str, ...] = (),
             uuid: str | None = None) -> str:
    """Create one provider with inventories, aggregates and traits."""
    prov = client.create_provider(name, uuid=uuid)
    gen = client.set_inventories(prov.uuid, prov.generation, inventories)
    if aggregates:
        gen = client.set_aggregates(prov.uuid, gen, aggregates)
    if traits:
        client.set_traits(prov.uuid, gen, traits)
    return prov.uuid


def build(client: PlacementClient, hosts: int = 20, sharing: int = 2,
          shared_fraction: float = 0.5, vcpus: int = 16,
          memory_mb: int = 65536, disk_gb: int = 2000,
          shared_disk_gb: int = 20000, cpu_ratio: float = 4.0,
          seed: int = 0, prefix: str = "") -> Fleet:
    """``hosts`` compute nodes; ``shared_fraction`` of them keep DISK_GB on
    one of ``sharing`` sharing providers (no local disk inventory), the rest
    have local disk. Deterministic for a given ``seed``."""
    rng = random.Random(seed)
    uid = lambda: str(uuidlib.UUID(int=rng.getrandbits(128), version=4))  # noqa: E731
    aggs = [uid() for _ in range(sharing)]
    shared = tuple(
        add_host(client, f"{prefix}shared-storage-{i}",
                 {"DISK_GB": Inventory(shared_disk_gb)}, (aggs[i],),
                 (SHARING_TRAIT,), uuid=uid())
        for i in range(sharing))
    nodes = []
    for i in range(hosts):
        invs = {"VCPU": Inventory(vcpus, allocation_ratio=cpu_ratio),
                "MEMORY_MB": Inventory(memory_mb, reserved=512)}
        agg: tuple[str, ...] = ()
        if sharing and rng.random() < shared_fraction:
            agg = (aggs[i % sharing],)
        else:
            invs["DISK_GB"] = Inventory(disk_gb)
        nodes.append(add_host(client, f"{prefix}compute-{i}", invs, agg,
                              uuid=uid()))
    return Fleet(tuple(nodes), shared, dict(zip(shared, aggs)))
