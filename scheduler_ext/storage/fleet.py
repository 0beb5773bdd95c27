"""Build a fleet's storage from host reports on any PlacementClient: what a
scenario loader calls to turn an operator's storage layout into providers
and aggregates (embedded placement for a simulation, a real one for a lab).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from scheduler_ext.placement import Inventory, PlacementClient
from scheduler_ext.storage import sync, topology
from scheduler_ext.storage.errors import ReportError
from scheduler_ext.storage.report import HostReport


@dataclasses.dataclass(frozen=True)
class StorageFleet:
    """Provider UUIDs of the built fleet: compute nodes by host name,
    sharing providers by domain (several domains of one filesystem map to
    its one provider), and each sharing provider's aggregate."""

    hosts: Mapping[str, str]
    sharing: Mapping[str, str]
    aggregates: Mapping[str, str]        # sharing provider uuid -> aggregate
    members: Mapping[str, tuple[str, ...]]  # sharing provider uuid -> host names
    writes: int
    warnings: tuple[str, ...]


def storage(client: PlacementClient, reports: Iterable[HostReport], *,
            compute_inventories: Mapping[str, Mapping[str, Inventory]] | None = None,
            reserved_disk_gb: int = 0, allocation_ratio: float = 1.0,
            size_tolerance: float = 0.01) -> StorageFleet:
    """Create the compute nodes named by ``reports`` that placement does not
    have yet (with ``compute_inventories[host]``), then one sharing provider
    per storage domain with its aggregate on every member. Idempotent.
    ReportError for contradictory reports or a missing compute inventory;
    SyncRefused when a sharing provider would shrink below its usage."""
    reports = list(reports)
    topo = topology.build(reports, reserved_disk_gb=reserved_disk_gb,
                          allocation_ratio=allocation_ratio,
                          size_tolerance=size_tolerance)
    known = {p.name: p.uuid for p in client.list_providers()}
    writes = 0
    for host in sorted({r.host for r in reports} - set(known)):
        invs = (compute_inventories or {}).get(host)
        if invs is None:
            raise ReportError(f"no compute inventory given for host {host}, "
                              "which placement does not have", host=host)
        prov = client.create_provider(host)
        client.set_inventories(prov.uuid, prov.generation, invs)
        known[host] = prov.uuid
        writes += 2
    the_plan = sync.plan(client, topo)
    writes += sync.apply(client, the_plan)
    return StorageFleet(
        hosts={r.host: known[r.host] for r in reports},
        sharing={d: s.uuid for s in topo.providers for d in s.domains},
        aggregates={s.uuid: s.aggregate for s in topo.providers},
        members={s.uuid: s.members for s in topo.providers},
        writes=writes, warnings=tuple(the_plan.warnings))
