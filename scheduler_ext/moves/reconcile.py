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
  usage only goes down, and confirm and revert stay correct. Except when
  either holds a whole device (``placement.WHOLE_DEVICE_TRAIT``): old and
  new devices are never the same, and only nova's state (the migration
  holding the old ones) lets confirm free the old devices and revert the
  new, so that state is left as it is.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.placement import (SHARING_TRAIT, AllocationWrite, Allocations,
                                     ConsumerAllocations, PlacementClient,
                                     allocations)
from scheduler_ext.placement.client import read_whole_devices

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
        """Return one Fix per instance whose allocations are off, or whose
        plan failed; with ``apply`` each is written (one atomic write each)
        and marked. One instance's failure (placement's 409 or 5xx, a
        provider gone...) is recorded in its Fix (``error``) and never stops
        the others. This is the one rule set of every reconcile: the
        scheduler service's and the CLI's."""
        fixes = []
        for inst in instances:
            fix = self.reconcile_one(inst, apply)
            if fix is not None:
                fixes.append(fix)
        return fixes

    def reconcile_one(self, inst: InstanceState, apply: bool = True) -> Fix | None:
        """Plan (and with ``apply`` write) the fix of one instance: None
        when placement already agrees, else the Fix, ``applied`` or with
        its ``error``. Never raises for a placement error or a plan that
        cannot be made: the error is logged and returned in the Fix."""
        try:
            fix = self.plan(inst)
        except errors.SchedulerExtError as exc:
            LOG.warning("reconcile of instance %s cannot be planned: %s",
                        inst.uuid, exc)
            return Fix(inst.uuid, "no plan", {}, error=str(exc))
        if fix is None or not apply:
            return fix
        try:
            self.client.post_allocations(fix.writes)
        except errors.SchedulerExtError as exc:
            LOG.warning("reconcile of instance %s not applied (%s): %s",
                        inst.uuid, fix.reason, exc)
            return dataclasses.replace(fix, error=str(exc))
        LOG.info("reconciled instance %s: %s", inst.uuid, fix.reason)
        return dataclasses.replace(fix, applied=True)

    # ------------------------------------------------------------ planning
    def plan(self, inst: InstanceState) -> Fix | None:
        """The one write that brings ``inst`` to its targets (module
        docstring), or None when placement already agrees."""
        held = self.client.get_consumer(inst.uuid)
        migs = {m.migration_uuid: self.client.get_consumer(m.migration_uuid)
                for m in inst.moves}
        active = [m for m in inst.moves if m.in_progress]
        plan = _Plan(inst, held, migs)
        if not active:
            self._settled(plan)
        elif active[-1].source == active[-1].dest:
            self._same_host(plan, active[-1])
        else:
            self._other_host(plan, active[-1])
        if not plan.targets:
            return None
        writes = {}
        for consumer, allocs in plan.targets.items():
            current = held if consumer == inst.uuid else migs[consumer]
            ctype = "INSTANCE" if consumer == inst.uuid else "MIGRATION"
            writes[consumer] = AllocationWrite(
                allocs, inst.project_id, inst.user_id, current.generation, ctype)
        return Fix(inst.uuid, "; ".join(plan.reasons), writes)

    def _settled(self, plan: "_Plan") -> None:
        """No move in progress: the instance holds its live flavor, the
        finished migrations nothing."""
        inst, held = plan.inst, plan.held
        # where the flavor sits: the instance's providers, else those of a
        # migration left holding it (a conductor that died mid-move)
        left = allocations.total(*(m.allocations for m in plan.migs.values()))
        want = allocations.merge_missing(
            self._place(inst.resources, inst.host, held.allocations, left),
            plan.keep(held.allocations))
        if want != allocations.copy(held.allocations):
            plan.target(inst.uuid, want,
                        f"instance holds {allocations.copy(held.allocations)}, "
                        f"live flavor needs {want}")
        for m in inst.moves:
            if plan.migs[m.migration_uuid].allocations:
                plan.target(m.migration_uuid, {},
                            f"finished migration {m.migration_uuid} "
                            "still holds allocations")

    def _same_host(self, plan: "_Plan", move: MoveState) -> None:
        """A same-host move in progress: the instance holds max(old, new),
        the migration nothing."""
        held, mig = plan.held, plan.migs[move.migration_uuid]
        if mig.allocations and read_whole_devices(self.client, allocations.total(
                held.allocations, mig.allocations)):
            return      # nova's own state, which devices need (module doc)
        need = {rc: max(move.old_resources.get(rc, 0),
                        move.new_resources.get(rc, 0))
                for rc in set(move.old_resources) | set(move.new_resources)}
        both = allocations.total(held.allocations, mig.allocations)
        if plan.managed_totals(held.allocations) == need and not mig.allocations:
            return
        plan.target(plan.inst.uuid, allocations.merge_missing(
            self._place(need, move.source, both), plan.keep(both)),
            f"same-host move: instance holds "
            f"{allocations.class_totals(held.allocations)} and migration "
            f"{allocations.class_totals(mig.allocations)}; the instance should "
            f"hold max(old, new) = {need} and the migration nothing")
        if mig.allocations:
            plan.targets[move.migration_uuid] = {}

    def _other_host(self, plan: "_Plan", move: MoveState) -> None:
        """A move to another host in progress: the migration holds the old
        flavor on the source, the instance the new one on the destination."""
        for consumer, res, host, who in (
                (move.migration_uuid, move.old_resources, move.source, "migration"),
                (plan.inst.uuid, move.new_resources, move.dest, "instance")):
            current = (plan.migs[consumer] if consumer == move.migration_uuid
                       else plan.held)
            have = plan.managed_totals(current.allocations)
            if have != dict(res):
                plan.target(consumer, allocations.merge_missing(
                    self._place(res, host, current.allocations),
                    plan.keep(current.allocations)),
                    f"{who} of move {move.migration_uuid} holds {have}, "
                    f"needs {dict(res)}")

    def _place(self, resources: Mapping[str, int], host: str,
               current: Mapping[str, Mapping[str, int]],
               fallback: Mapping[str, Mapping[str, int]] | None = None
               ) -> dict[str, dict[str, int]]:
        """Where each class of ``resources`` should sit: the provider of
        ``current`` holding it (the largest holder that is the host, a
        provider of its tree or shares with it), else of ``fallback``, else
        the host, else a provider of its tree, else a sharing provider of
        the host's aggregates that has the class."""
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

    def _provider_for(self, rc: str, host: str) -> str:
        _, invs = self.client.get_inventories(host)
        if rc in invs:
            return host
        _, aggs = self.client.get_aggregates(host)
        # the host's children first, then sharing providers
        for prov in sorted(self.client.list_providers(),
                           key=lambda p: p.root_provider_uuid != host):
            if prov.uuid == host:
                continue
            if prov.root_provider_uuid != host:
                _, traits = self.client.get_traits(prov.uuid)
                if SHARING_TRAIT not in traits or \
                        not self.client.get_aggregates(prov.uuid)[1] & aggs:
                    continue
            if rc in self.client.get_inventories(prov.uuid)[1]:
                return prov.uuid
        raise errors.InvalidRequest(
            f"no provider of {rc} for host {host}: neither it, a provider of "
            "its tree nor a sharing provider in its aggregates has inventory",
            field="resource_class", value=rc)


def managed_classes(inst: InstanceState) -> set[str]:
    """The classes a reconcile may rewrite for ``inst``: those its live
    flavor or the flavors of its moves give. Anything else a consumer holds
    (ports' bandwidth, accelerators, PCI devices) is kept exactly where it
    is, untouched, by every reconcile (the service's and the CLI's)."""
    return set(inst.resources).union(
        *(set(m.old_resources) | set(m.new_resources) for m in inst.moves))


class _Plan:
    """The targets of one instance's fix while they are being worked out."""

    def __init__(self, inst: InstanceState, held: ConsumerAllocations,
                 migs: Mapping[str, ConsumerAllocations]):
        self.inst, self.held, self.migs = inst, held, migs
        self.targets: dict[str, dict[str, dict[str, int]]] = {}
        self.reasons: list[str] = []
        self.managed = managed_classes(inst)

    def target(self, consumer: str, allocs: dict[str, dict[str, int]],
               reason: str) -> None:
        self.targets[consumer] = allocs
        self.reasons.append(reason)

    def keep(self, allocs: Allocations) -> dict[str, dict[str, int]]:
        """The entries of classes no flavor gives (kept where they are)."""
        return allocations.only_classes(allocs, self.managed, exclude=True)

    def managed_totals(self, allocs: Allocations) -> dict[str, int]:
        """Units per flavor-given class."""
        return allocations.class_totals(
            allocations.only_classes(allocs, self.managed))


def dump_instances(states: Iterable[InstanceState]) -> list[dict]:
    """The JSON form of instance states (what ``load_instances`` reads)."""
    return [dataclasses.asdict(s) for s in states]


def load_instances(data: list) -> list[InstanceState]:
    """InstanceStates from their JSON form; a missing or malformed field is
    an InvalidRequest naming the entry."""
    out = []
    for i, d in enumerate(data):
        try:
            moves = tuple(MoveState(m["migration_uuid"], m["source"], m["dest"],
                                    m["old_resources"], m["new_resources"],
                                    bool(m["in_progress"]))
                          for m in d.get("moves", ()))
            out.append(InstanceState(d["uuid"], d["host"], d["resources"],
                                     d["project_id"], d["user_id"], moves))
        except (KeyError, TypeError) as exc:
            raise errors.InvalidRequest(
                f"instances[{i}]: missing or malformed field {exc}",
                field=f"instances[{i}]", value=d) from exc
    return out


def audit(client: PlacementClient, instances: Iterable[InstanceState]) -> list[Fix]:
    """Dry-run reconcile: what would change."""
    return Reconciler(client).run(instances, apply=False)


__all__ = ["Fix", "InstanceState", "MoveState", "Reconciler", "audit",
           "managed_classes",
           "dump_instances", "load_instances"]
