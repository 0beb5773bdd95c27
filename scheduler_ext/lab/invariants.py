"""Checks of the invariants every move must keep (design.md, "Invariants").

Each function returns a list of violations (empty when all hold), so the
simulator can report them and the tests can assert on them.

Two scopes, the same rules:

* full: every provider, every server, every consumer placement holds
  (``check_providers``, ``check_servers``, ``check_consumers`` over all);
* touched: only what one step wrote (``TouchedChecker``): the providers and
  consumers a placement's change feed names since the last check, the
  servers owning those consumers, and the servers the step acted on. A break
  a step makes is on something it wrote, so the touched check reports it at
  that step; the full check (every N steps and at the end) is the net.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from scheduler_ext import errors
from scheduler_ext.moves.reconcile import InstanceState
from scheduler_ext.placement import Allocations, PlacementClient, allocations
from scheduler_ext.placement.client import ChangeFeed

#: consumer uuid -> the server it belongs to (instance or migration), or None
Owner = Callable[[str], "str | None"]


def state(client: PlacementClient) -> tuple[dict, dict]:
    """(usage per provider, allocations per consumer) of the whole placement,
    for comparing two placements or two moments."""
    consumers = {}
    providers = client.list_providers()
    for prov in providers:
        for consumer in client.get_provider_allocations(prov.uuid):
            consumers[consumer] = client.get_consumer(consumer).allocations
    return ({p.uuid: client.get_usages(p.uuid) for p in providers}, consumers)


def provider_problems(name: str, invs: Mapping, usages: Mapping[str, int],
                      held: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Usage equals the sum of the consumers' allocations (``held``) and
    never exceeds capacity, for every class of one provider."""
    problems = []
    summed = allocations.class_totals(held)
    for rc, inv in invs.items():
        used = usages.get(rc, 0)
        if used != summed.get(rc, 0):
            problems.append(f"{name} {rc}: usage {used} != sum of "
                            f"allocations {summed.get(rc, 0)}")
        if used > inv.capacity:
            problems.append(f"{name} {rc}: usage {used} exceeds "
                            f"capacity {inv.capacity:g}")
    return problems


def check_provider(client: PlacementClient, rp_uuid: str, name: str,
                   consumers: set[str] | None = None) -> list[str]:
    """``provider_problems`` of one provider as placement shows it;
    ``consumers``, when given, collects the consumers holding allocations
    there."""
    _, invs = client.get_inventories(rp_uuid)
    held = client.get_provider_allocations(rp_uuid)
    if consumers is not None:
        consumers.update(held)
    return provider_problems(name, invs, client.get_usages(rp_uuid), held)


def check_providers(client: PlacementClient,
                    consumers: set[str] | None = None) -> list[str]:
    """``check_provider`` for every provider."""
    problems = []
    for prov in client.list_providers():
        problems += check_provider(client, prov.uuid, prov.name, consumers)
    return problems


def check_consumers(client: PlacementClient, consumers: Iterable[str],
                    owner: Owner) -> list[str]:
    """Every consumer holding allocations belongs to a live server (its
    instance or one of its migrations)."""
    problems = []
    for c in consumers:
        if owner(c) is None:
            held = client.get_consumer(c).allocations
            if held:
                problems.append(f"consumer {c} holds {allocations.copy(held)} "
                                "but belongs to no server")
    return problems


def _expected(s: InstanceState, inst: dict[str, int],
              migs: Mapping[str, dict[str, int]], exact: bool,
              problems: list[str]) -> list[tuple[str, dict[str, int], dict[str, int]]]:
    """(who, holds, needs) for one server; exact-only breaks go to
    ``problems``."""
    active = s.moves[-1] if s.moves and s.moves[-1].in_progress else None
    if active is None:
        if exact:
            problems += [f"server {s.uuid}: finished migration {m} still "
                         f"holds {held}" for m, held in migs.items() if held]
        return [("instance", inst, dict(s.resources))]
    mig = migs[active.migration_uuid]
    if active.source == active.dest:
        if exact and mig:
            problems.append(f"server {s.uuid}: same-host migration "
                            f"{active.migration_uuid} holds {mig}")
        both = dict(inst)
        for rc, n in mig.items():
            both[rc] = both.get(rc, 0) + n
        need = {rc: max(active.old_resources.get(rc, 0),
                        active.new_resources.get(rc, 0))
                for rc in set(active.old_resources) | set(active.new_resources)}
        return [("instance+migration", both, need)]
    return [("migration", mig, dict(active.old_resources)),
            ("instance", inst, dict(active.new_resources))]


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
    problems: list[str] = []
    for s in servers:
        inst = allocations.class_totals(client.get_consumer(s.uuid).allocations)
        # only ``exact`` looks at finished moves: otherwise the move in
        # progress is the one read (a server keeps every move it had)
        moves = s.moves if exact else [m for m in s.moves[-1:] if m.in_progress]
        migs = {m.migration_uuid: allocations.class_totals(
                    client.get_consumer(m.migration_uuid).allocations)
                for m in moves}
        for who, have, need in _expected(s, inst, migs, exact, problems):
            for rc in set(have) | set(need):
                h, n = have.get(rc, 0), need.get(rc, 0)
                if h < n or (exact and h != n):
                    problems.append(f"server {s.uuid}: {who} holds {rc}={h}, "
                                    f"expected {n}")
    return problems


def holds_more_than_flavor(client: PlacementClient, s: InstanceState) -> bool:
    """The server awaits a reconcile: no move in progress, yet its instance
    holds more than its live flavor or a finished migration holds
    anything (the reconcile window of a same-host resize)."""
    if s.moves and s.moves[-1].in_progress:
        return False
    inst = allocations.class_totals(client.get_consumer(s.uuid).allocations)
    if any(n > s.resources.get(rc, 0) for rc, n in inst.items()):
        return True
    return any(client.get_consumer(m.migration_uuid).allocations for m in s.moves)


class TouchedChecker:
    """Invariant checks on what changed since the last call, read from a
    placement's change feed.

    It keeps its own ledger: what every consumer held when last read, and
    per provider and class the sum of that. A changed consumer is re-read
    and its difference applied; a changed provider's usage is then compared
    with the ledger's sum and with its capacity. ``owner`` maps a consumer
    to its server; ``server_state`` gives a live server's InstanceState
    (None once deleted). The fleet's used and total capacity per class
    (``utilisation``) follow the providers it reads."""

    def __init__(self, client: PlacementClient, owner: Owner,
                 server_state: Callable[[str], InstanceState | None]):
        if not isinstance(client, ChangeFeed):
            raise TypeError("the touched-set check needs a placement with a "
                            "change feed (the embedded placement)")
        self.client = client
        self.feed: ChangeFeed = client
        self.owner = owner
        self.server_state = server_state
        self.position = self.feed.change_position()
        self.names: dict[str, str] = {}
        self.held: dict[str, dict[str, dict[str, int]]] = {}
        self.sums: dict[str, dict[str, int]] = {}
        self.rows: dict[str, tuple[dict[str, int], dict[str, float]]] = {}
        self.used: dict[str, int] = {}
        self.capacity: dict[str, float] = {}
        for prov in client.list_providers():
            self.names[prov.uuid] = prov.name
            for c, res in client.get_provider_allocations(prov.uuid).items():
                self.held.setdefault(c, {})[prov.uuid] = dict(res)
        for allocs in self.held.values():
            self._add(allocs, 1)
        for rp in self.names:
            self._provider(rp)

    def _add(self, allocs: Allocations, sign: int) -> None:
        for rp, res in allocs.items():
            sums = self.sums.setdefault(rp, {})
            for rc, n in res.items():
                sums[rc] = sums.get(rc, 0) + sign * n

    def _consumer(self, c: str) -> set[str]:
        """Re-read one consumer into the ledger; the providers it held or
        holds."""
        new = allocations.copy(self.client.get_consumer(c).allocations)
        old = self.held.pop(c, {})
        self._add(old, -1)
        self._add(new, 1)
        if new:
            self.held[c] = new
        return set(old) | set(new)

    def _provider(self, rp: str) -> list[str]:
        """Re-read one provider: usage against the ledger and capacity;
        the utilisation totals follow it."""
        used, cap = self.rows.pop(rp, ({}, {}))
        for rc, n in used.items():
            self.used[rc] -= n
        for rc, c in cap.items():
            self.capacity[rc] -= c
        try:
            _, invs = self.client.get_inventories(rp)
        except errors.NotFound:
            return [f"deleted provider {rp} still holds {self.sums[rp]}"] \
                if any(self.sums.get(rp, {}).values()) else []
        if rp not in self.names:
            self.names[rp] = self.client.get_provider(rp).name
        usages = self.client.get_usages(rp)
        sums = self.sums.get(rp, {})
        problems = provider_problems(self.names[rp], invs, usages,
                                     {"ledger": sums})
        used = {rc: usages.get(rc, 0) for rc in invs}
        cap = {rc: inv.capacity for rc, inv in invs.items()}
        self.rows[rp] = (used, cap)
        for rc, n in used.items():
            self.used[rc] = self.used.get(rc, 0) + n
        for rc, c in cap.items():
            self.capacity[rc] = self.capacity.get(rc, 0.0) + c
        return problems

    def utilisation(self) -> dict[str, float]:
        """Used over capacity per class, fleet-wide (0..1, more when
        overcommitted)."""
        return {rc: self.used.get(rc, 0) / c
                for rc, c in sorted(self.capacity.items()) if c > 0}

    def check(self, acted_on: Iterable[str],
              exact: bool) -> tuple[list[str], list[InstanceState]]:
        """(violations, servers checked) for what changed since the last
        call plus the servers in ``acted_on`` (their state may have moved
        without a write). Raises RuntimeError when the feed no longer
        reaches back (run a full check instead)."""
        changes = self.feed.changes_since(self.position)
        self.position = changes.position
        if changes.providers is None or changes.consumers is None:
            raise RuntimeError("change feed overrun: run a full check")
        providers = dict.fromkeys(changes.providers)
        servers = dict.fromkeys(acted_on)
        for c in changes.consumers:
            providers.update(dict.fromkeys(sorted(self._consumer(c))))
            owner = self.owner(c)
            if owner is not None:
                servers[owner] = None
        problems: list[str] = []
        for rp in providers:
            problems += self._provider(rp)
        problems += check_consumers(self.client, changes.consumers, self.owner)
        states = [s for s in map(self.server_state, servers) if s is not None]
        problems += check_servers(self.client, states, exact)
        return problems, states

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
