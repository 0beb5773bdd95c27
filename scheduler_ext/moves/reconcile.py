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
  missing class two providers could serve) is reported (``Uncertain``, a
  Fix with its error) and nothing is written.

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
from typing import Callable, Iterable, Mapping, Sequence

from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.placement import (SHARING_TRAIT, AllocationWrite, Allocations,
                                     ConsumerAllocations, PlacementClient,
                                     allocations)

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



class Uncertain(errors.SchedulerExtError):
    """A class of the instance cannot be placed with certainty (module
    docstring): the instance is reported and nothing is written."""


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
        plan = _Plan(inst, held, migs)
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
        want = allocations.merge_missing(
            self._place(inst.resources, inst.host, held.allocations, left),
            self._kept(plan, inst.host, [held.allocations, *left]))
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
        if mig.allocations and not plan.foldable(held.allocations,
                                                 mig.allocations):
            return      # nova's own state, which confirm and revert need
        both = allocations.total(held.allocations, mig.allocations)
        plan.target(plan.inst.uuid, allocations.merge_missing(
            self._place(need, move.source, both),
            self._kept(plan, move.source, [held.allocations, mig.allocations])),
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
                    self._place(res, host, current.allocations),
                    plan.keep(current.allocations)),
                    f"{who} of move {move.migration_uuid} holds {have}, "
                    f"needs {dict(res)}")

    def _place(self, resources: Mapping[str, int], host: str,
               current: Allocations,
               fallback: Sequence[Allocations] = ()) -> allocations.AllocationDict:
        """Where each class of ``resources`` should sit: the provider of
        ``current`` holding it (the host, a provider of its tree or one
        sharing with it), else the one of the ``fallback`` sets, else
        ``_provider_for``. Uncertain when the holders are several and hold
        another total than the one needed (which to trim or grow?)."""
        out: allocations.AllocationDict = {}
        for rc, n in resources.items():
            holders = self._holders(rc, host, [current])
            if not holders:
                holders = self._holders(rc, host, fallback)
            if not holders:
                holders = {self._provider_for(rc, host): n}
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
                if res.get(rc) and self._serves(rp, host):
                    out[rp] = max(out.get(rp, 0), res[rc])
        return out

    def _kept(self, plan: "_Plan", host: str,
              sets: Sequence[Allocations]) -> allocations.AllocationDict:
        """The classes no flavor gives, each kept exactly once: per class,
        the one way the consumers of ``sets`` hold it ({provider: units});
        when they hold it differently, the one way on providers serving
        ``host``; else Uncertain."""
        out: allocations.AllocationDict = {}
        for rc in sorted(set().union(*map(allocations.classes, sets))
                         - plan.managed):
            ways: list[dict[str, int]] = []
            for allocs in sets:
                way = {rp: res[rc] for rp, res in allocs.items() if res.get(rc)}
                if way and way not in ways:
                    ways.append(way)
            if len(ways) > 1:
                ways = [w for w in ways
                        if all(self._serves(rp, host) for rp in w)]
            if len(ways) != 1:
                raise Uncertain(
                    f"{rc} (a class no flavor gives) is held differently by "
                    f"the instance and its migrations: which one the server "
                    f"uses cannot be derived")
            for rp, k in ways[0].items():
                out.setdefault(rp, {})[rc] = k
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
        """The provider of ``rc`` for a server that holds it nowhere: the
        host if it has inventory of it, else the one provider of its tree
        that has, else the one sharing provider of its aggregates that
        has. Uncertain when two could; InvalidRequest when none can."""
        _, invs = self.client.get_inventories(host)
        if rc in invs:
            return host
        _, aggs = self.client.get_aggregates(host)
        tree, sharing = [], []
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
                 migs: Mapping[str, ConsumerAllocations]):
        self.inst, self.held, self.migs = inst, held, migs
        self.targets: dict[str, dict[str, dict[str, int]]] = {}
        self.reasons: list[str] = []
        self.managed = managed_classes(inst)

    def target(self, consumer: str, allocs: dict[str, dict[str, int]],
               reason: str) -> None:
        self.targets[consumer] = allocs
        self.reasons.append(reason)

    def keep(self, allocs: Allocations) -> allocations.AllocationDict:
        """The entries of classes no flavor gives (kept where they are)."""
        return allocations.only_classes(allocs, self.managed, exclude=True)

    def managed_totals(self, allocs: Allocations) -> dict[str, int]:
        """Units per flavor-given class."""
        return allocations.class_totals(
            allocations.only_classes(allocs, self.managed))

    def foldable(self, a: Allocations, b: Allocations) -> bool:
        """A fold of ``a`` and ``b`` into one consumer forgets nothing
        confirm or revert needs: each flavor class both hold sits on one
        provider, the same in both (the live flavor then says how much),
        and each other class is held alike by both (nothing derives which
        flavor a class held by one of them belongs to)."""
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
                    current.consumer_type or ctype)
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


__all__ = ["Fix", "InstanceState", "MoveState", "Reconciler", "Uncertain", "audit",
           "managed_classes",
           "dump_instances", "load_instances"]
