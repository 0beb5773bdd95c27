"""Bring placement back to the move invariants.

Given what nova knows (each instance's live flavor and host, each move and
whether it is still in progress), compute the writes that make placement
agree, each as ONE atomic multi-consumer write. Dry-run by default.

A reconcile changes only what it can derive:

* the classes a flavor gives are brought to the targets below, each on the
  provider the server holds it on (the instance's, else a migration's);
  only a class the server holds nowhere goes to the host, else the one
  provider of the host's tree, else the one sharing provider of its
  aggregates that has it;
* every other class (a port's bandwidth and packet rate, accelerators, PCI
  devices in placement, anything unknown) is kept exactly once, on the
  providers that hold it: held alike by the instance and a migration it is
  kept once, never summed; held only by a migration it moves to the
  instance, never dropped;
* what cannot be placed with certainty (a class held differently by two
  consumers, a flavor class spread over providers in other amounts, a
  missing class two providers could serve) is reported
  (``moves.placing.Uncertain``, a Fix with its error) and nothing is
  written.

Targets:

* an instance with no move in progress holds exactly its live flavor on its
  host; the migration consumers of its finished moves hold nothing;
* a move in progress to another host: the migration holds exactly the old
  flavor on the source side (what revert moves back) and the instance
  exactly the new flavor on the destination;
* a move in progress on the same host: the instance holds exactly
  max(old, new) per class and the migration nothing. This also folds nova's
  own same-host state (instance new + migration old, left when the
  conductor reschedules onto the source) into the safe one: the provider's
  usage only goes down, and confirm and revert stay correct. The fold is
  made only when each flavor class both consumers hold sits on one
  provider, the same for both, and every other class is held alike by both
  (a port's bandwidth). Otherwise (a vGPU on another pGPU, the disk on
  another sharing provider, devices the flavors do not share) only nova's
  state says what is old and what new, and confirm and revert need it: it
  is left as it is.

Every write carries the generations of every consumer read for the plan
(a consumer left as it is is written unchanged, as a guard), so a consumer
changed since the read makes it fail; ``recheck`` checks nova's state
again after placement's read, so a move that started meanwhile is not
"restored" over.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Mapping

from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.moves.placing import Placer
from scheduler_ext.placement import (AllocationWrite, Allocations,
                                     ConsumerAllocations, PlacementClient,
                                     WritableAllocations, allocations)

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


#: ``recheck(state)``: nova's state of the instance is still ``state``
Recheck = Callable[[InstanceState], bool]


class Reconciler:
    """Compute (and optionally apply) the fixes for a set of instances."""

    def __init__(self, client: PlacementClient):
        self.client = client

    def run(self, instances: Iterable[InstanceState], apply: bool = False,
            recheck: Recheck | None = None) -> list[Fix]:
        """Return one Fix per instance whose allocations are off, or whose
        plan failed; with ``apply`` each is written (one atomic write each)
        and marked. One instance's failure (placement's 409 or 5xx, a
        provider gone, a class it cannot place...) is recorded in its Fix
        (``error``) and never stops the others. This is the one rule set of
        every reconcile: the scheduler service's and the CLI's."""
        fixes = []
        for inst in instances:
            fix = self.reconcile_one(inst, apply, recheck)
            if fix is not None:
                fixes.append(fix)
        return fixes

    def reconcile_one(self, inst: InstanceState, apply: bool = True,
                      recheck: Recheck | None = None) -> Fix | None:
        """Plan (and with ``apply`` write) the fix of one instance: None
        when placement already agrees, else the Fix, ``applied`` or with
        its ``error``. ``recheck``, called after placement was read and
        before writing, says whether nova's state is still ``inst``; when
        it is not, nothing is written (the Fix's error says so; retry
        with nova's state read again). Never raises for a placement error
        or a plan that cannot be made: the error is logged and returned in
        the Fix."""
        try:
            fix = self.plan(inst)
        except errors.SchedulerExtError as exc:
            LOG.warning("reconcile of instance %s cannot be planned: %s",
                        inst.uuid, exc)
            return Fix(inst.uuid, "no plan", {}, error=str(exc))
        if fix is None or not apply:
            return fix
        if recheck is not None and not recheck(inst):
            LOG.info("reconcile of instance %s not applied: nova's state "
                     "changed while it was planned", inst.uuid)
            return dataclasses.replace(
                fix, error="nova's state of the instance changed while the "
                "fix was planned; nothing written")
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
        docstring), or None when placement already agrees. Uncertain when a
        class cannot be placed with certainty."""
        held = self.client.get_consumer(inst.uuid)
        migs = {m.migration_uuid: self.client.get_consumer(m.migration_uuid)
                for m in inst.moves}
        active = [m for m in inst.moves if m.in_progress]
        plan = _Plan(inst, held, migs,
                     Placer(self.client, managed_classes(inst)))
        if not active:
            self._settled(plan)
        elif active[-1].source == active[-1].dest:
            self._same_host(plan, active[-1])
        else:
            self._other_host(plan, active[-1])
        if not plan.targets:
            return None
        return Fix(inst.uuid, "; ".join(plan.reasons), plan.writes())

    def _settled(self, plan: "_Plan") -> None:
        """No move in progress: the instance holds its live flavor, the
        finished migrations nothing."""
        inst, held = plan.inst, plan.held
        # where the flavor sits: the instance's providers, else those of a
        # migration left holding it (a conductor that died mid-move)
        left = [m.allocations for m in plan.migs.values()]
        placer = plan.placer
        want = allocations.merge_missing(
            placer.flavor(inst.resources, inst.host, held.allocations, left),
            placer.kept(inst.host, [held.allocations, *left]))
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
        the migration nothing, when the fold is certain (module doc)."""
        held, mig = plan.held, plan.migs[move.migration_uuid]
        need = {rc: max(move.old_resources.get(rc, 0),
                        move.new_resources.get(rc, 0))
                for rc in set(move.old_resources) | set(move.new_resources)}
        if plan.managed_totals(held.allocations) == need and not mig.allocations:
            return
        if mig.allocations and not plan.placer.foldable(
                held.allocations, mig.allocations):
            return      # nova's own state, which confirm and revert need
        both = allocations.total(held.allocations, mig.allocations)
        plan.target(plan.inst.uuid, allocations.merge_missing(
            plan.placer.flavor(need, move.source, both),
            plan.placer.kept(move.source, [held.allocations, mig.allocations])),
            f"same-host move: instance holds "
            f"{allocations.class_totals(held.allocations)} and migration "
            f"{allocations.class_totals(mig.allocations)}; the instance should "
            f"hold max(old, new) = {need} and the migration nothing")
        if mig.allocations:
            plan.targets[move.migration_uuid] = {}

    def _other_host(self, plan: "_Plan", move: MoveState) -> None:
        """A move to another host in progress: the migration holds the old
        flavor on the source, the instance the new one on the destination;
        each keeps its own other classes (its host's ports...)."""
        for consumer, res, host, who in (
                (move.migration_uuid, move.old_resources, move.source, "migration"),
                (plan.inst.uuid, move.new_resources, move.dest, "instance")):
            current = (plan.migs[consumer] if consumer == move.migration_uuid
                       else plan.held)
            have = plan.managed_totals(current.allocations)
            if have != dict(res):
                plan.target(consumer, allocations.merge_missing(
                    plan.placer.flavor(res, host, current.allocations),
                    plan.keep(current.allocations)),
                    f"{who} of move {move.migration_uuid} holds {have}, "
                    f"needs {dict(res)}")

def managed_classes(inst: InstanceState) -> set[str]:
    """The classes a reconcile may rewrite for ``inst``: those its live
    flavor or the flavors of its moves give. Anything else a consumer holds
    (ports' bandwidth, accelerators, PCI devices) is kept exactly once, on
    the providers holding it, by every reconcile (the service's and the
    CLI's)."""
    return set(inst.resources).union(
        *(set(m.old_resources) | set(m.new_resources) for m in inst.moves))


class _Plan:
    """The targets of one instance's fix while they are being worked out,
    and the consumers they were planned from."""

    def __init__(self, inst: InstanceState, held: ConsumerAllocations,
                 migs: Mapping[str, ConsumerAllocations], placer: Placer):
        self.inst, self.held, self.migs = inst, held, migs
        self.placer = placer
        self.managed = placer.managed
        self.targets: dict[str, WritableAllocations] = {}
        self.reasons: list[str] = []

    def target(self, consumer: str, allocs: WritableAllocations,
               reason: str) -> None:
        self.targets[consumer] = allocs
        self.reasons.append(reason)

    def keep(self, allocs: Allocations) -> WritableAllocations:
        """The entries of classes no flavor gives (kept where they are)."""
        return allocations.only_classes(allocs, self.managed, exclude=True)

    def managed_totals(self, allocs: Allocations) -> dict[str, int]:
        """Units per flavor-given class."""
        return allocations.class_totals(
            allocations.only_classes(allocs, self.managed))

    def writes(self) -> dict[str, AllocationWrite]:
        """The one write: each target, and every other consumer read that
        holds something written unchanged, all with the generations read
        (a consumer read holding nothing cannot be guarded: placement
        would keep an empty consumer record for it)."""
        inst = self.inst
        out = {}
        for consumer, current, ctype in (
                (inst.uuid, self.held, "INSTANCE"),
                *((m, c, "MIGRATION") for m, c in self.migs.items())):
            if consumer in self.targets:
                out[consumer] = AllocationWrite(
                    self.targets[consumer], inst.project_id, inst.user_id,
                    current.generation, ctype)
            elif current.generation is not None:
                out[consumer] = AllocationWrite(
                    allocations.copy(current.allocations),
                    current.project_id or inst.project_id,
                    current.user_id or inst.user_id, current.generation,
                    ctype)      # placement reads "unknown" for an untyped one
        return out


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
