"""The DISK_GB data migration nova never had (nova bug 1784020, problem 1):
move every consumer's DISK_GB from a compute node in a sharing aggregate to
the sharing provider, and stop the compute node from offering DISK_GB.

What nova 34 does (its libvirt driver, ``update_provider_tree``): when a
DISK_GB sharing provider is in the compute node's provider tree it logs
"Ignoring sharing provider - see bug #1784020" and reports the compute
node's own DISK_GB anyway, whenever the instances filesystem (or LVM
volume group, or RBD pool) is 1 GiB or more. No option turns that off:
``[compute] provider_config_location`` files may add custom classes only,
and ``[DEFAULT] disk_allocation_ratio = 0.0`` is read as "unset". So every
disk on shared storage is counted twice (or only on the compute node, for
servers booted before the sharing provider existed).

What does stick: with ``[DEFAULT] disk_allocation_ratio`` unset (nova's
default), nova keeps the DISK_GB ``allocation_ratio`` placement holds
(``ComputeDriver._get_allocation_ratios``: the option, else the inventory's
own ratio, else ``initial_disk_allocation_ratio`` for a new inventory). The
migration sets it to ``CLOSED_RATIO``, so the compute node's DISK_GB
capacity stays below 1 GiB: it keeps being reported, it offers nothing,
and nova leaves it so (``tests/nova/cases_storage.py`` checks it across
nova's provider cache refresh). A ``disk_allocation_ratio`` set on that
host puts the ratio back once nova refreshes its cache of the provider
(``[compute] resource_provider_association_refresh``): ``plan`` cannot see
nova.conf, so the command says so.

One atomic write per consumer (``PUT /allocations/{consumer}`` with its
consumer generation): the consumer's other allocations are kept, its
DISK_GB on the compute node goes, and the sharing provider's becomes the
larger of the two (a consumer already holding its disk there as well was
counted twice; it keeps it once). Every write is planned from a fresh read
of the consumer, so a run is idempotent and safe to interrupt: a second run
moves what the first did not. A write that races another writer (consumer
generation conflict) is re-read and retried; one placement refuses (the
sharing provider is full) leaves that consumer as it was and is reported.
"""

from __future__ import annotations

import dataclasses

from scheduler_ext import errors
from scheduler_ext.placement import PlacementClient
from scheduler_ext.placement.client import read_listed_providers
from scheduler_ext.placement.model import SHARING_TRAIT, ProviderRecord

DISK = "DISK_GB"
#: the compute node's DISK_GB allocation_ratio after the migration: its
#: capacity stays below 1 GiB for any filesystem under 10^9 GiB
CLOSED_RATIO = 1e-9
CONFLICT_RETRIES = 3

NOVA_SETTING = (
    "nova 34's libvirt driver keeps reporting DISK_GB on a compute node "
    "beside a sharing provider (bug 1784020; no option turns it off, and "
    "[DEFAULT] disk_allocation_ratio = 0.0 is read as unset). Leave "
    "[DEFAULT] disk_allocation_ratio unset in nova.conf on these hosts: "
    "nova then keeps the allocation_ratio this command writes "
    f"({CLOSED_RATIO:g}), so the compute node offers no DISK_GB. A value "
    "set there puts the ratio back at nova's next provider cache refresh "
    "([compute] resource_provider_association_refresh).")


@dataclasses.dataclass(frozen=True)
class ComputeDisk:
    """A compute node holding DISK_GB inventory in the aggregate of one
    DISK_GB sharing provider."""

    compute: str            # provider uuid
    name: str
    sharing: str            # the sharing provider's uuid
    sharing_name: str
    closed: bool            # its DISK_GB capacity is below 1 GiB already


@dataclasses.dataclass(frozen=True)
class DiskMove:
    consumer: str
    node: ComputeDisk
    amount: int             # GiB on the compute node now

    def describe(self) -> str:
        return (f"consumer {self.consumer}: DISK_GB {self.amount} from "
                f"{self.node.name} to {self.node.sharing_name}")


@dataclasses.dataclass
class DiskMigrationPlan:
    nodes: list[ComputeDisk] = dataclasses.field(default_factory=list)
    moves: list[DiskMove] = dataclasses.field(default_factory=list)
    skipped: list[str] = dataclasses.field(default_factory=list)

    @property
    def to_close(self) -> list[ComputeDisk]:
        return [n for n in self.nodes if not n.closed]


@dataclasses.dataclass
class DiskMigrationResult:
    """``failed``: consumer -> why it was left as it was."""

    moved: list[DiskMove] = dataclasses.field(default_factory=list)
    closed: list[ComputeDisk] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)


def _sharing_disk(records: list[ProviderRecord]) -> dict[str, list[ProviderRecord]]:
    """aggregate -> the DISK_GB sharing providers in it."""
    out: dict[str, list[ProviderRecord]] = {}
    for r in records:
        if SHARING_TRAIT in r.traits and DISK in r.inventories:
            for agg in r.aggregates:
                out.setdefault(agg, []).append(r)
    return out


def plan(client: PlacementClient) -> DiskMigrationPlan:
    """The compute nodes to close and the consumers to move (reads only:
    every provider once, and the allocations of each compute node found)."""
    records, _ = read_listed_providers(client, client.list_providers())
    by_agg = _sharing_disk(records)
    out = DiskMigrationPlan()
    for r in sorted(records, key=lambda r: r.provider.name):
        if SHARING_TRAIT in r.traits or DISK not in r.inventories:
            continue
        sharing = {s.provider.uuid: s for agg in r.aggregates
                   for s in by_agg.get(agg, [])}
        if not sharing:
            continue
        if len(sharing) > 1:
            out.skipped.append(
                f"compute node {r.provider.name}: in the aggregates of "
                f"{len(sharing)} DISK_GB sharing providers "
                f"({', '.join(sorted(s.provider.name for s in sharing.values()))}); "
                "which one holds its disks is ambiguous: left as it is")
            continue
        (target,) = sharing.values()
        node = ComputeDisk(
            r.provider.uuid, r.provider.name, target.provider.uuid,
            target.provider.name, r.inventories[DISK].capacity < 1)
        out.nodes.append(node)
        held = client.get_provider_allocations(node.compute)
        for consumer in sorted(held):
            amount = held[consumer].get(DISK, 0)
            if amount:
                out.moves.append(DiskMove(consumer, node, amount))
    return out


def _move_once(client: PlacementClient, move: DiskMove) -> bool:
    """One atomic write for ``move`` from a fresh read; False when there is
    nothing left to move (done meanwhile)."""
    current = client.get_consumer(move.consumer)
    allocs = {rp: dict(rcs) for rp, rcs in current.allocations.items()}
    on_node = allocs.get(move.node.compute, {}).pop(DISK, 0)
    if not on_node:
        return False
    if not allocs[move.node.compute]:
        del allocs[move.node.compute]
    shared = allocs.setdefault(move.node.sharing, {})
    shared[DISK] = max(shared.get(DISK, 0), on_node)
    client.put_allocations(move.consumer, current.write(allocs))
    return True


def _close(client: PlacementClient, node: ComputeDisk) -> None:
    for attempt in range(CONFLICT_RETRIES):
        gen, invs = client.get_inventories(node.compute)
        if DISK not in invs or invs[DISK].capacity < 1:
            return
        disk = dataclasses.replace(invs[DISK], allocation_ratio=CLOSED_RATIO)
        try:
            client.set_inventories(node.compute, gen, {**invs, DISK: disk})
            return
        except errors.ConcurrentUpdate:
            if attempt == CONFLICT_RETRIES - 1:
                raise


def apply(client: PlacementClient, the_plan: DiskMigrationPlan,
          result: DiskMigrationResult | None = None) -> DiskMigrationResult:
    """Move every planned consumer, then close the compute nodes' DISK_GB,
    then move what arrived on them meanwhile (a fresh plan)."""
    result = result or DiskMigrationResult()
    for move in the_plan.moves:
        for attempt in range(CONFLICT_RETRIES):
            try:
                if _move_once(client, move):
                    result.moved.append(move)
                break
            except errors.ConcurrentUpdate:
                if attempt == CONFLICT_RETRIES - 1:
                    result.failed[move.consumer] = (
                        f"{move.describe()}: the consumer kept changing; "
                        "left as it was")
            except errors.PlacementUnavailable:
                raise
            except errors.PlacementError as exc:
                result.failed[move.consumer] = (
                    f"{move.describe()}: placement refused ({exc}); left as "
                    "it was")
                break
    for node in the_plan.to_close:
        _close(client, node)
        result.closed.append(node)
    if the_plan.to_close:      # what landed on them before they closed
        late = plan(client)
        late.moves = [m for m in late.moves if m.consumer not in result.failed]
        late.nodes = []
        if late.moves:
            apply(client, late, result)
    return result
