"""Bring placement back to the move invariants.

Given what nova knows (each instance's live flavor and host, each move and
whether it is still in progress), compute the writes that make placement
agree, each as ONE atomic multi-consumer write. Dry-run by default.

Targets:

* classes no flavor of the instance names (ports, accelerators, PCI
  devices) are kept where they are, untouched;
* an instance with no move in progress holds exactly its live flavor on its
  host (a class the host has no inventory of comes from a sharing provider
  in one of its aggregates, the one it already uses if any); the migration
  consumers of its finished moves hold nothing;
* a move in progress to another host: the migration holds exactly the old
  flavor on the source side (what revert moves back) and the instance
  exactly the new flavor on the destination;
* a move in progress on the same host: the instance holds exactly
  max(old, new) per class and the migration nothing. This also folds nova's
  own same-host state (instance new + migration old, left when the
  conductor reschedules onto the source) into the safe one: the provider's
  usage only goes down, and confirm and revert stay correct.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.placement import AllocationWrite, PlacementClient
from scheduler_ext.placement.client import allocation_totals
from scheduler_ext.placement.model import SHARING_TRAIT

LOG = logging.getLogger(__name__)



@dataclasses.dataclass(frozen=True)
class MoveState:
    """A move nova knows about. ``in_progress`` is True from scheduling until
    confirm, revert or failure has been handled by nova."""

    migration_uuid: str
    source: str
    dest: str
    old_resources: Mapping[str, int]
    new_resources: Mapping[str, int]
    in_progress: bool


@dataclasses.dataclass(frozen=True)
class InstanceState:
    """An instance as nova sees it: live flavor amounts and compute node."""

    uuid: str
    host: str
    resources: Mapping[str, int]
    project_id: str
    user_id: str
    moves: tuple[MoveState, ...] = ()


@dataclasses.dataclass(frozen=True)
class Fix:
    """One atomic write and why it is needed."""

    instance_uuid: str
    reason: str
    writes: Mapping[str, AllocationWrite]
    applied: bool = False
    error: str | None = None



class Reconciler:
    """Compute (and optionally apply) the fixes for a set of instances."""

    def __init__(self, client: PlacementClient):
        self.client = client

    def run(self, instances: Iterable[InstanceState], apply: bool = False) -> list[Fix]:
        """Return one Fix per instance whose allocations are off; with
        ``apply`` each is written (one atomic write each) and marked."""
        fixes = []
        for inst in instances:
            fix = self.plan(inst)
            if fix is None:
                continue
            if apply:
                try:
                    self.client.post_allocations(fix.writes)
                    fix = dataclasses.replace(fix, applied=True)
                except errors.PlacementError as exc:
                    LOG.error("reconcile of instance %s failed: %s", inst.uuid, exc)
                    fix = dataclasses.replace(fix, error=str(exc))
            fixes.append(fix)
        return fixes

    # ------------------------------------------------------------ planning
    def plan(self, inst: InstanceState) -> Fix | None:
        held = self.client.get_consumer(inst.uuid)
        migs = {m.migration_uuid: self.client.get_consumer(m.migration_uuid)
                for m in inst.moves}
        active = [m for m in inst.moves if m.in_progress]
        # classes a flavor gives; anything else a consumer holds (ports,
        # accelerators, PCI devices...) is kept exactly where it is
        managed = set(inst.resources).union(
            *(set(m.old_resources) | set(m.new_resources) for m in inst.moves))
        keep = lambda allocs: {rp: {rc: n for rc, n in res.items()  # noqa: E731
                                    if rc not in managed}
                               for rp, res in allocs.items()}
        targets: dict[str, dict[str, dict[str, int]]] = {}
        reasons: list[str] = []
        if not active:
            # where the flavor sits: the instance's providers, else those of
            # a migration left holding it (a conductor that died mid-move)
            left = {rp: dict(res) for m in migs.values()
                    for rp, res in m.allocations.items()}
            want = _merge(self._place(inst.resources, inst.host,
                                      held.allocations, left),
                          keep(held.allocations))
            if want != _norm(held.allocations):
                targets[inst.uuid] = want
                reasons.append(f"instance holds {_norm(held.allocations)}, "
                               f"live flavor needs {want}")
            for m in inst.moves:
                if migs[m.migration_uuid].allocations:
                    targets[m.migration_uuid] = {}
                    reasons.append(f"finished migration {m.migration_uuid} "
                                   "still holds allocations")
        else:
            move = active[-1]
            mig = migs[move.migration_uuid]
            if move.source == move.dest:
                need = {rc: max(move.old_resources.get(rc, 0),
                                move.new_resources.get(rc, 0))
                        for rc in set(move.old_resources) | set(move.new_resources)}
                both = {rp: dict(res) for rp, res in held.allocations.items()}
                for rp, res in mig.allocations.items():
                    for rc, n in res.items():
                        both.setdefault(rp, {})[rc] = both.get(rp, {}).get(rc, 0) + n
                have = {rc: n for rc, n in allocation_totals(held.allocations).items()
                        if rc in managed}
                if have != need or mig.allocations:
                    targets[inst.uuid] = _merge(
                        self._place(need, move.source, both), keep(both))
                    if mig.allocations:
                        targets[move.migration_uuid] = {}
                    reasons.append(
                        f"same-host move: instance holds "
                        f"{allocation_totals(held.allocations)} and migration "
                        f"{allocation_totals(mig.allocations)}; the instance should hold "
                        f"max(old, new) = {need} and the migration nothing")
            else:
                for consumer, res, host, who in (
                        (move.migration_uuid, move.old_resources, move.source,
                         "migration"),
                        (inst.uuid, move.new_resources, move.dest, "instance")):
                    current = (mig if consumer == move.migration_uuid else held)
                    have = {rc: n for rc, n in
                            allocation_totals(current.allocations).items()
                            if rc in managed}
                    if have != dict(res):
                        targets[consumer] = _merge(
                            self._place(res, host, current.allocations),
                            keep(current.allocations))
                        reasons.append(f"{who} of move {move.migration_uuid} "
                                       f"holds {have}, needs {dict(res)}")
        if not targets:
            return None
        writes = {}
        for consumer, allocs in targets.items():
            current = held if consumer == inst.uuid else migs[consumer]
            ctype = "INSTANCE" if consumer == inst.uuid else "MIGRATION"
            writes[consumer] = AllocationWrite(
                allocs, inst.project_id, inst.user_id, current.generation, ctype)
        return Fix(inst.uuid, "; ".join(reasons), writes)

    def _place(self, resources: Mapping[str, int], host: str,
               current: Mapping[str, Mapping[str, int]],
               fallback: Mapping[str, Mapping[str, int]] | None = None
               ) -> dict[str, dict[str, int]]:
        """Where each class of ``resources`` should sit: the provider of
        ``current`` holding it (the largest holder that is the host or
        shares with it), else of ``fallback``, else the host, else a sharing
        provider of the host's aggregates that has the class."""
        out: dict[str, dict[str, int]] = {}
        for rc, n in resources.items():
            rp = None
            for allocs in (current, fallback or {}):
                holders = sorted(((res[rc], rp) for rp, res in allocs.items()
                                  if res.get(rc) and self._serves(rp, host)),
                                 reverse=True)
                if holders:
                    rp = holders[0][1]
                    break
            rp = rp or self._provider_for(rc, host)
            out.setdefault(rp, {})[rc] = n
        return out

    def _serves(self, rp: str, host: str) -> bool:
        """``rp`` is the host, or a sharing provider in one of its aggregates."""
        if rp == host:
            return True
        try:
            _, traits = self.client.get_traits(rp)
            _, aggs = self.client.get_aggregates(rp)
        except errors.NotFound:
            return False
        return SHARING_TRAIT in traits and bool(
            aggs & self.client.get_aggregates(host)[1])

    def _provider_for(self, rc: str, host: str) -> str:
        _, invs = self.client.get_inventories(host)
        if rc in invs:
            return host
        _, aggs = self.client.get_aggregates(host)
        for prov in self.client.list_providers():
            if prov.uuid == host:
                continue
            _, traits = self.client.get_traits(prov.uuid)
            if SHARING_TRAIT not in traits:
                continue
            _, paggs = self.client.get_aggregates(prov.uuid)
            if paggs & aggs and rc in self.client.get_inventories(prov.uuid)[1]:
                return prov.uuid
        raise errors.InvalidRequest(
            f"no provider of {rc} for host {host}: it has no inventory and no "
            "sharing provider in its aggregates", field="resource_class", value=rc)


def _norm(allocs: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    return {rp: dict(res) for rp, res in allocs.items() if res}


def _merge(a: Mapping[str, Mapping[str, int]],
           b: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """``a`` plus the classes of ``b`` it does not name, per provider."""
    out = {rp: dict(res) for rp, res in a.items()}
    for rp, res in b.items():
        for rc, n in res.items():
            out.setdefault(rp, {}).setdefault(rc, n)
    return _norm(out)


def audit(client: PlacementClient, instances: Iterable[InstanceState]) -> list[Fix]:
    """Dry-run reconcile: what would change."""
    return Reconciler(client).run(instances, apply=False)


__all__ = ["Fix", "InstanceState", "MoveState", "Reconciler", "audit"]
