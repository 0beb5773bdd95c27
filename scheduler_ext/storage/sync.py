"""Apply a storage topology to placement, idempotently.

``plan`` reads placement and lists only the writes that would change
something; a second run after ``apply`` plans nothing and writes nothing.
For each sharing provider: create it (deterministic UUID and name), set its
``DISK_GB`` inventory (other classes kept), add ``MISC_SHARES_VIA_AGGREGATE``
and its aggregate (other traits and aggregates kept); add the aggregate to
each member compute node (found by name, as nova names its compute node
providers). Nothing is removed.

Refusals (the whole plan is refused, nothing written): lowering a sharing
provider's DISK_GB capacity below what is allocated from it; a provider of
another UUID already holding the name. Warnings: a member compute node that
placement does not know; a member that still has its own DISK_GB
inventory (nova's libvirt driver keeps reporting local disk in some
releases, nova bug 1784020: the same disk is then counted twice); a
provider in the aggregate that no report lists.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from scheduler_ext import errors
from scheduler_ext.placement import PlacementClient
from scheduler_ext.placement.model import SHARING_TRAIT, Inventory
from scheduler_ext.storage.errors import SyncRefused
from scheduler_ext.storage.topology import SharingProviderSpec, Topology

DISK = "DISK_GB"
CONFLICT_RETRIES = 3


@dataclasses.dataclass(frozen=True)
class Change:
    """One write: ``kind`` is create-provider, set-inventory, add-trait or
    add-aggregate; ``value`` the inventory, trait or aggregate."""

    kind: str
    provider: str          # uuid
    name: str
    value: object = None

    def describe(self) -> str:
        if self.kind == "set-inventory":
            inv = self.value
            assert isinstance(inv, Inventory)
            return (f"{self.name}: DISK_GB total {inv.total} reserved "
                    f"{inv.reserved} ratio {inv.allocation_ratio:g}")
        if self.kind == "create-provider":
            return f"{self.name}: create provider {self.provider}"
        return f"{self.name}: {self.kind} {self.value}"


@dataclasses.dataclass
class SyncPlan:
    changes: list[Change] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    refusals: list[str] = dataclasses.field(default_factory=list)


def _current(client: PlacementClient, rp: str) -> tuple[dict, frozenset, frozenset]:
    _, invs = client.get_inventories(rp)
    _, traits = client.get_traits(rp)
    _, aggs = client.get_aggregates(rp)
    return invs, traits, aggs


def _plan_sharing(client: PlacementClient, spec: SharingProviderSpec,
                  by_name: dict, by_uuid: dict, out: SyncPlan) -> None:
    holder = by_name.get(spec.name)
    if holder is not None and holder.uuid != spec.uuid:
        out.refusals.append(
            f"{spec.name}: the name is held by provider {holder.uuid}, not "
            f"{spec.uuid} (derived from the domain); rename or delete it")
        return
    if spec.uuid not in by_uuid:
        out.changes += [Change("create-provider", spec.uuid, spec.name),
                        Change("set-inventory", spec.uuid, spec.name, spec.inventory),
                        Change("add-trait", spec.uuid, spec.name, SHARING_TRAIT),
                        Change("add-aggregate", spec.uuid, spec.name, spec.aggregate)]
        return
    invs, traits, aggs = _current(client, spec.uuid)
    if invs.get(DISK) != spec.inventory:
        used = client.get_usages(spec.uuid).get(DISK, 0)
        if used > spec.inventory.capacity:
            out.refusals.append(
                f"{spec.name}: DISK_GB capacity would drop to "
                f"{spec.inventory.capacity:g} GiB below the {used} GiB "
                f"allocated (domain {spec.domain}, hosts "
                f"{', '.join(spec.members)})")
        else:
            out.changes.append(Change("set-inventory", spec.uuid, spec.name,
                                      spec.inventory))
    if SHARING_TRAIT not in traits:
        out.changes.append(Change("add-trait", spec.uuid, spec.name, SHARING_TRAIT))
    if spec.aggregate not in aggs:
        out.changes.append(Change("add-aggregate", spec.uuid, spec.name,
                                  spec.aggregate))


def _plan_members(client: PlacementClient, spec: SharingProviderSpec,
                  by_name: dict, out: SyncPlan) -> None:
    paths = dict(spec.paths)
    for host in spec.members:
        prov = by_name.get(host)
        if prov is None:
            out.warnings.append(
                f"host {host}, path {paths[host]}: no compute node provider "
                f"named {host} in placement; not added to {spec.name}")
            continue
        _, invs = client.get_inventories(prov.uuid)
        _, aggs = client.get_aggregates(prov.uuid)
        if DISK in invs:
            out.warnings.append(
                f"host {host}, path {paths[host]}: compute node {host} shares "
                f"{spec.name} but still reports its own DISK_GB "
                f"({invs[DISK].total} GiB): disk counted twice (nova bug "
                "1784020)")
        if spec.aggregate not in aggs:
            out.changes.append(Change("add-aggregate", prov.uuid, host,
                                      spec.aggregate))


def _plan_strays(client: PlacementClient, spec: SharingProviderSpec,
                 providers: Iterable, out: SyncPlan) -> None:
    members = set(spec.members) | {spec.name}
    for prov in providers:
        if prov.name in members:
            continue
        _, aggs = client.get_aggregates(prov.uuid)
        if spec.aggregate in aggs:
            out.warnings.append(
                f"provider {prov.name} is in the aggregate of {spec.name} but "
                "no report lists it; left as it is")


def plan(client: PlacementClient, topology: Topology,
         check_strays: bool = False) -> SyncPlan:
    """The writes that would make placement match ``topology`` (reads only:
    the providers list, then three reads per sharing provider and two per
    member). ``check_strays`` also reads every other provider's aggregates
    (one read each) to warn about providers in a domain's aggregate that
    no report lists."""
    providers = client.list_providers()
    by_name = {p.name: p for p in providers}
    by_uuid = {p.uuid: p for p in providers}
    out = SyncPlan(warnings=list(topology.warnings))
    for spec in topology.providers:
        _plan_sharing(client, spec, by_name, by_uuid, out)
        _plan_members(client, spec, by_name, out)
        if check_strays:
            _plan_strays(client, spec, providers, out)
    return out


def _write(client: PlacementClient, change: Change) -> None:
    rp = change.provider
    if change.kind == "create-provider":
        client.create_provider(change.name, uuid=rp)
    elif change.kind == "set-inventory":
        gen, invs = client.get_inventories(rp)
        assert isinstance(change.value, Inventory)
        client.set_inventories(rp, gen, {**invs, DISK: change.value})
    elif change.kind == "add-trait":
        gen, traits = client.get_traits(rp)
        client.set_traits(rp, gen, traits | {str(change.value)})
    elif change.kind == "add-aggregate":
        gen, aggs = client.get_aggregates(rp)
        client.set_aggregates(rp, gen, aggs | {str(change.value)})
    else:
        raise ValueError(f"unknown change {change.kind}")


def apply(client: PlacementClient, sync_plan: SyncPlan) -> int:
    """Write ``sync_plan``; returns the number of writes. Refuses (writing
    nothing) when the plan has refusals. A write that races another writer
    (409 concurrent update) is re-read and retried."""
    if sync_plan.refusals:
        raise SyncRefused("; ".join(sync_plan.refusals))
    for change in sync_plan.changes:
        for attempt in range(CONFLICT_RETRIES):
            try:
                _write(client, change)
                break
            except errors.ConcurrentUpdate:
                if attempt == CONFLICT_RETRIES - 1:
                    raise
    return len(sync_plan.changes)
