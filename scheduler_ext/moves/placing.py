"""Where a reconcile puts each class of one server (see
``moves.reconcile``): flavor classes on the provider the server holds them
on, every other class exactly once where it is held, and ``Uncertain``
where that cannot be derived."""

from __future__ import annotations

from typing import Mapping, Sequence

from scheduler_ext import errors
from scheduler_ext.placement import (SHARING_TRAIT, Allocations,
                                     PlacementClient, WritableAllocations,
                                     allocations)
from scheduler_ext.placement.client import read_whole_devices


class Uncertain(errors.SchedulerExtError):
    """A class of the instance cannot be placed with certainty: the
    instance is reported and nothing is written."""


class Placer:
    """Where the classes of one server go. ``managed`` are the classes its
    flavors give (the others are kept, never derived)."""

    def __init__(self, client: PlacementClient, managed: set[str]):
        self.client, self.managed = client, managed

    def flavor(self, resources: Mapping[str, int], host: str,
               current: Allocations,
               fallback: Sequence[Allocations] = ()) -> WritableAllocations:
        """Where each class of ``resources`` should sit: the provider of
        ``current`` holding it (the host, a provider of its tree or one
        sharing with it), else the one of the ``fallback`` sets, else
        ``provider_for``. Uncertain when the holders are several and hold
        another total than the one needed (which to trim or grow?)."""
        out: WritableAllocations = {}
        for rc, n in resources.items():
            holders = self._holders(rc, host, [current])
            if not holders:
                holders = self._holders(rc, host, fallback)
            if not holders:
                holders = {self.provider_for(rc, host): n}
            if len(holders) > 1 and sum(holders.values()) != n:
                raise Uncertain(
                    f"{rc} is held on {len(holders)} providers ({holders}) "
                    f"and {n} is needed: which to change cannot be derived")
            if len(holders) == 1:
                holders = {rp: n for rp in holders}
            for rp, k in holders.items():
                out.setdefault(rp, {})[rc] = k
        return out

    def _holders(self, rc: str, host: str,
                 sets: Sequence[Allocations]) -> dict[str, int]:
        """{provider serving ``host``: units of ``rc``} over ``sets``, the
        largest amount where several sets hold it on one provider."""
        out: dict[str, int] = {}
        for allocs in sets:
            for rp, res in allocs.items():
                if res.get(rc) and self.serves(rp, host):
                    out[rp] = max(out.get(rp, 0), res[rc])
        return out

    def kept(self, host: str,
              sets: Sequence[Allocations]) -> WritableAllocations:
        """The classes no flavor gives, each kept exactly once: per class,
        the one way the consumers of ``sets`` hold it ({provider: units});
        when they hold it differently, the one way on providers serving
        ``host``; else Uncertain."""
        out: WritableAllocations = {}
        for rc in sorted(set().union(*map(allocations.classes, sets))
                         - self.managed):
            ways: list[dict[str, int]] = []
            for allocs in sets:
                way = {rp: res[rc] for rp, res in allocs.items() if res.get(rc)}
                if way and way not in ways:
                    ways.append(way)
            if len(ways) > 1:
                ways = [w for w in ways
                        if all(self.serves(rp, host) for rp in w)]
            if len(ways) != 1:
                raise Uncertain(
                    f"{rc} (a class no flavor gives) is held differently by "
                    f"the instance and its migrations: which one the server "
                    f"uses cannot be derived")
            for rp, k in ways[0].items():
                out.setdefault(rp, {})[rc] = k
        return out

    def serves(self, rp: str, host: str) -> bool:
        """``rp`` is the host, a provider of its tree (a child: a NUMA
        node, a NIC, a pGPU), or a sharing provider in one of its
        aggregates."""
        if rp == host:
            return True
        try:
            if self.client.get_provider(rp).root_provider_uuid == host:
                return True
            _, traits = self.client.get_traits(rp)
            _, aggs = self.client.get_aggregates(rp)
        except errors.NotFound:
            return False
        return SHARING_TRAIT in traits and bool(
            aggs & self.client.get_aggregates(host)[1])

    def provider_for(self, rc: str, host: str) -> str:
        """The provider of ``rc`` for a server that holds it nowhere: the
        host if it has inventory of it, else the one provider of its tree
        that has, else the one sharing provider of its aggregates that
        has. Uncertain when two could; InvalidRequest when none can."""
        _, invs = self.client.get_inventories(host)
        if rc in invs:
            return host
        _, aggs = self.client.get_aggregates(host)
        tree: list[str] = []
        sharing: list[str] = []
        for prov in self.client.list_providers():
            if prov.uuid == host:
                continue
            if prov.root_provider_uuid != host:
                _, traits = self.client.get_traits(prov.uuid)
                if SHARING_TRAIT not in traits or \
                        not self.client.get_aggregates(prov.uuid)[1] & aggs:
                    continue
            if rc in self.client.get_inventories(prov.uuid)[1]:
                (tree if prov.root_provider_uuid == host else sharing).append(
                    prov.uuid)
        found = tree or sharing
        if len(found) > 1:
            raise Uncertain(
                f"{rc} is held nowhere and {len(found)} providers of host "
                f"{host} could hold it ({', '.join(sorted(found))}): which "
                "one the server uses cannot be derived")
        if not found:
            raise errors.InvalidRequest(
                f"no provider of {rc} for host {host}: neither it, a provider "
                "of its tree nor a sharing provider in its aggregates has "
                "inventory", field="resource_class", value=rc)
        return found[0]

    def foldable(self, a: Allocations, b: Allocations) -> bool:
        """A fold of ``a`` and ``b`` into one consumer forgets nothing
        confirm or revert needs: each flavor class both hold sits on one
        provider, the same in both (the live flavor then says how much),
        and each other class is held alike by both (nothing derives which
        flavor a class held by one of them belongs to). A device both hold
        (``read_whole_devices``: a vGPU's pGPU, a whole device) is never
        foldable: the old and new flavor never share its units, so each
        holds its own there, and max(old, new) would drop one."""
        if read_whole_devices(self.client, a) & read_whole_devices(self.client, b):
            return False
        for rc in allocations.classes(a) | allocations.classes(b):
            ways = [{rp: res[rc] for rp, res in allocs.items() if res.get(rc)}
                    for allocs in (a, b)]
            if rc not in self.managed:
                if ways[0] != ways[1]:
                    return False
            elif all(ways) and (len(ways[0]) != 1
                                or ways[0].keys() != ways[1].keys()):
                return False
        return True
