"""Make placement match a storage topology, idempotently, in both
directions.

``plan`` reads placement and lists only the writes that would change
something; a second run after ``apply`` plans nothing and writes nothing.

Additions, for each sharing provider (one per filesystem): create it
(deterministic UUID and name), set its ``DISK_GB`` inventory (other classes
kept), add ``MISC_SHARES_VIA_AGGREGATE`` and its aggregate (other traits
and aggregates kept); add the aggregate to each member compute node (found
by name, as nova names its compute node providers).

Removals (``prune``; without it they are warnings saying what ``--prune``
would do). *Ours* are the providers named ``shared-storage:...`` and their
aggregates. A compute node leaves each of our aggregates that its report
does not put it in: its report says ``local`` or ``lost-mount``, or names
another filesystem (remounted from another source), or there is no report
for it at all (missing; found only with ``prune`` or ``check_strays``,
which read every provider's aggregates). An ``unconfirmed`` report changes
nothing: it cannot tell. A sharing provider of ours that no report names
any more is deleted only when it holds no allocations; one that does is
kept, with a warning (its consumers' disks are still there).

Refusals (the whole plan is refused, nothing written): lowering a sharing
provider's DISK_GB capacity below what is allocated from it; a provider of
another UUID already holding the name. Warnings: a member compute node that
placement does not know; a member that still has its own DISK_GB
inventory (nova's libvirt driver keeps reporting it, nova bug 1784020: the
same disk is then counted twice; ``storage migrate-disk`` moves the
allocations).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from scheduler_ext import errors
from scheduler_ext.placement import PlacementClient, Provider
from scheduler_ext.placement.model import SHARING_TRAIT, Inventory
from scheduler_ext.storage.errors import SyncRefused
from scheduler_ext.storage.topology import (
    NAME_PREFIX, SharingProviderSpec, Topology)

DISK = "DISK_GB"
CONFLICT_RETRIES = 3
#: the order writes are applied in: additions before removals
ORDER = ("create-provider", "set-inventory", "add-trait", "add-aggregate",
         "remove-aggregate", "delete-provider")


@dataclasses.dataclass(frozen=True)
class ProviderWrite:
    """One write to a provider of placement: ``kind`` is one of
    ``ORDER``; ``value`` the inventory, trait or aggregate; ``why`` the
    reason of a removal."""

    kind: str
    provider: str          # uuid
    name: str
    value: object = None
    why: str = ""

    def describe(self) -> str:
        if self.kind == "set-inventory":
            inv = self.value
            assert isinstance(inv, Inventory)
            return (f"{self.name}: DISK_GB total {inv.total} reserved "
                    f"{inv.reserved} ratio {inv.allocation_ratio:g}")
        if self.kind == "create-provider":
            return f"{self.name}: create provider {self.provider}"
        if self.kind == "delete-provider":
            return f"{self.name}: delete provider {self.provider} ({self.why})"
        return f"{self.name}: {self.kind} {self.value}" + (
            f" ({self.why})" if self.why else "")


@dataclasses.dataclass
class SyncPlan:
    changes: list[ProviderWrite] = dataclasses.field(default_factory=list)
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
            f"{spec.uuid} (derived from the filesystem); rename or delete it")
        return
    if spec.uuid not in by_uuid:
        out.changes += [
            ProviderWrite("create-provider", spec.uuid, spec.name),
            ProviderWrite("set-inventory", spec.uuid, spec.name, spec.inventory),
            ProviderWrite("add-trait", spec.uuid, spec.name, SHARING_TRAIT),
            ProviderWrite("add-aggregate", spec.uuid, spec.name, spec.aggregate)]
        return
    invs, traits, aggs = _current(client, spec.uuid)
    if invs.get(DISK) != spec.inventory:
        used = client.get_usages(spec.uuid).get(DISK, 0)
        if used > spec.inventory.capacity:
            out.refusals.append(
                f"{spec.name}: DISK_GB capacity would drop to "
                f"{spec.inventory.capacity:g} GiB below the {used} GiB "
                f"allocated (filesystem {spec.filesystem}, hosts "
                f"{', '.join(spec.members)})")
        else:
            out.changes.append(ProviderWrite("set-inventory", spec.uuid, spec.name,
                                             spec.inventory))
    if SHARING_TRAIT not in traits:
        out.changes.append(ProviderWrite("add-trait", spec.uuid, spec.name,
                                         SHARING_TRAIT))
    if spec.aggregate not in aggs:
        out.changes.append(ProviderWrite("add-aggregate", spec.uuid, spec.name,
                                         spec.aggregate))


def _plan_members(client: PlacementClient, spec: SharingProviderSpec,
                  by_name: dict, aggregates: dict[str, frozenset],
                  out: SyncPlan) -> None:
    paths = dict(spec.paths)
    for host in spec.members:
        prov = by_name.get(host)
        if prov is None:
            out.warnings.append(
                f"host {host}, path {paths[host]}: no compute node provider "
                f"named {host} in placement; not added to {spec.name}")
            continue
        _, invs = client.get_inventories(prov.uuid)
        if DISK in invs:
            out.warnings.append(
                f"host {host}, path {paths[host]}: compute node {host} shares "
                f"{spec.name} but still reports its own DISK_GB "
                f"({invs[DISK].total} GiB): disk counted twice (nova bug "
                "1784020); 'scheduler-ext storage migrate-disk' moves its "
                "allocations to the sharing provider")
        if spec.aggregate not in aggregates[prov.uuid]:
            out.changes.append(ProviderWrite("add-aggregate", prov.uuid, host,
                                             spec.aggregate))


def _ours(providers: Iterable[Provider]) -> list[Provider]:
    return [p for p in providers if p.name.startswith(NAME_PREFIX)]


def _plan_removals(client: PlacementClient, topology: Topology,
                   providers: list[Provider], aggregates: dict[str, frozenset],
                   prune: bool, out: SyncPlan) -> None:
    ours = _ours(providers)
    wanted = {s.uuid for s in topology.providers}
    our_aggs: dict[str, str] = {}            # aggregate -> provider name
    for prov in ours:
        for agg in aggregates[prov.uuid]:
            our_aggs[agg] = prov.name
    desired: dict[str, set[str]] = {}
    for spec in topology.providers:
        for host in spec.members:
            desired.setdefault(host, set()).add(spec.aggregate)
    states = {host: (state, path) for host, state, path in topology.states}
    for prov in providers:
        if prov.name.startswith(NAME_PREFIX) or prov.uuid not in aggregates:
            continue
        extra = sorted((aggregates[prov.uuid] & set(our_aggs))
                       - desired.get(prov.name, set()))
        if not extra:
            continue
        state, path = states.get(prov.name, ("missing", ""))
        where = f"host {prov.name}" + (f", path {path}" if path else "")
        if state == "unconfirmed":
            out.warnings.append(f"{where}: unconfirmed; left in "
                                f"{', '.join(our_aggs[a] for a in extra)}")
            continue
        why = {"shared": "its report names another filesystem",
               "missing": "no report for it"}.get(state, f"its report says {state}")
        for agg in extra:
            if prune:
                out.changes.append(ProviderWrite("remove-aggregate", prov.uuid,
                                                 prov.name, agg, why))
            else:
                out.warnings.append(f"{where}: {why}; --prune removes it from "
                                    f"{our_aggs[agg]} (aggregate {agg})")
    for prov in ours:
        if prov.uuid in wanted:
            continue
        held = client.get_provider_allocations(prov.uuid)
        if held:
            out.warnings.append(
                f"{prov.name}: no report names it, but it holds allocations "
                f"of {len(held)} consumer(s); kept")
        elif prune:
            out.changes.append(ProviderWrite("delete-provider", prov.uuid, prov.name,
                                             why="no report names it; no allocations"))
        else:
            out.warnings.append(f"{prov.name}: no report names it; --prune "
                                "deletes it (it holds no allocations)")


def plan(client: PlacementClient, topology: Topology, *, prune: bool = False,
         check_strays: bool = False) -> SyncPlan:
    """The writes that would make placement match ``topology`` (reads only).
    Reads the providers list, our sharing providers, and the aggregates of
    the reported hosts; with ``prune`` or ``check_strays`` every provider's
    aggregates (one read each), to find hosts in our aggregates that no
    report names."""
    listed = client.list_providers()
    reported = {host for host, _, _ in topology.states}
    aggregates = {}
    gone = set()
    for prov in listed:
        if prune or check_strays or prov.name in reported or \
                prov.name.startswith(NAME_PREFIX):
            try:
                aggregates[prov.uuid] = client.get_aggregates(prov.uuid)[1]
            except errors.NotFound:         # deleted since the list
                gone.add(prov.uuid)
    providers = [p for p in listed if p.uuid not in gone]
    by_name = {p.name: p for p in providers}
    by_uuid = {p.uuid: p for p in providers}
    out = SyncPlan(warnings=list(topology.warnings))
    for spec in topology.providers:
        _plan_sharing(client, spec, by_name, by_uuid, out)
        _plan_members(client, spec, by_name, aggregates, out)
    _plan_removals(client, topology, providers, aggregates, prune, out)
    out.changes.sort(key=lambda c: ORDER.index(c.kind))
    return out


def _write(client: PlacementClient, change: ProviderWrite) -> None:
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
    elif change.kind == "remove-aggregate":
        gen, aggs = client.get_aggregates(rp)
        client.set_aggregates(rp, gen, aggs - {str(change.value)})
    elif change.kind == "delete-provider":
        if client.get_provider_allocations(rp):
            raise SyncRefused(f"{change.name}: allocations appeared since the "
                              "plan; not deleted")
        client.delete_provider(rp)
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
