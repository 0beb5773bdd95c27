"""Checks of the invariants every move must keep (design.md, "Invariants").

Each function returns a list of violations (empty when all hold), so the
simulator can report them and the tests can assert on them.
"""

from __future__ import annotations

from typing import Iterable

from scheduler_ext.placement import PlacementClient, allocations
from scheduler_ext.moves.reconcile import InstanceState




def state(client: PlacementClient) -> tuple[dict, dict]:
    """(usage per provider, allocations per consumer) of the whole placement,
    for comparing two placements or two moments."""
    consumers = {}
    providers = client.list_providers()
    for prov in providers:
        for consumer in client.get_provider_allocations(prov.uuid):
            consumers[consumer] = client.get_consumer(consumer).allocations
    return ({p.uuid: client.get_usages(p.uuid) for p in providers}, consumers)


def check_providers(client: PlacementClient) -> list[str]:
    """Usage equals the sum of the consumers' allocations and never exceeds
    capacity, for every provider and class."""
    problems = []
    for prov in client.list_providers():
        _, invs = client.get_inventories(prov.uuid)
        usages = client.get_usages(prov.uuid)
        summed = allocations.class_totals(client.get_provider_allocations(prov.uuid))
        for rc, inv in invs.items():
            used = usages.get(rc, 0)
            if used != summed.get(rc, 0):
                problems.append(f"{prov.name} {rc}: usage {used} != sum of "
                                f"allocations {summed.get(rc, 0)}")
            if used > inv.capacity:
                problems.append(f"{prov.name} {rc}: usage {used} exceeds "
                                f"capacity {inv.capacity:g}")
    return problems


def check_servers(client: PlacementClient, servers: Iterable[InstanceState],
                  exact: bool) -> list[str]:
    """Each server accounted on the providers it uses.

    Always: nothing lost (at least the flavor; during a same-host move at
    least max(old, new) between instance and migration; during another-host
    move the migration at least the old flavor and the instance at least the
    new one). With ``exact`` (after reconcile): no more than that either, the
    migration of a same-host move holds nothing and finished migrations hold
    nothing.
    """
    problems = []
    for s in servers:
        inst = allocations.class_totals(client.get_consumer(s.uuid).allocations)
        migs = {m.migration_uuid: allocations.class_totals(client.get_consumer(m.migration_uuid).allocations)
                for m in s.moves}
        active = s.moves[-1] if s.moves and s.moves[-1].in_progress else None
        expect: list[tuple[str, dict[str, int], dict[str, int]]] = []
        if active is None:
            expect.append(("instance", inst, dict(s.resources)))
            if exact:
                for m, held in migs.items():
                    if held:
                        problems.append(f"server {s.uuid}: finished migration "
                                        f"{m} still holds {held}")
        elif active.source == active.dest:
            both = dict(inst)
            for rc, n in migs[active.migration_uuid].items():
                both[rc] = both.get(rc, 0) + n
            need = {rc: max(active.old_resources.get(rc, 0),
                            active.new_resources.get(rc, 0))
                    for rc in set(active.old_resources) | set(active.new_resources)}
            expect.append(("instance+migration", both, need))
            if exact and migs[active.migration_uuid]:
                problems.append(f"server {s.uuid}: same-host migration "
                                f"{active.migration_uuid} holds "
                                f"{migs[active.migration_uuid]}")
        else:
            expect.append(("migration", migs[active.migration_uuid],
                           dict(active.old_resources)))
            expect.append(("instance", inst, dict(active.new_resources)))
        for who, have, need in expect:
            for rc in set(have) | set(need):
                h, n = have.get(rc, 0), need.get(rc, 0)
                if h < n or (exact and h != n):
                    problems.append(f"server {s.uuid}: {who} holds {rc}={h}, "
                                    f"expected {n}")
    return problems


def check_one_provider_per_class(client: PlacementClient,
                                 consumers: Iterable[str]) -> list[str]:
    """Per provider: no consumer holds one class on two providers (a
    server's disk is in one place, so a DISK_GB split over two sharing
    providers counts it twice, once on a provider that does not hold it)."""
    problems = []
    for consumer in consumers:
        held = client.get_consumer(consumer).allocations
        for rc in allocations.classes(held):
            where = sorted(rp for rp, res in held.items() if res.get(rc))
            if len(where) > 1:
                problems.append(f"consumer {consumer} holds {rc} on "
                                f"{len(where)} providers: {where}")
    return problems
