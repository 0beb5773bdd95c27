"""One move flow (``move_flows.Flow``) played with one move strategy:
nova's modelled conductor and compute (``nova_model``) on a small fleet
(``move_fleet``), a scheduler that can die at one of its writes, and one
reconcile at the end (``run_flow``), whose process can die at one of its
writes too (``move_reconcile``: then the restarted service's pass); its end state by provider name and
consumer role (``Outcome``), for ``move_oracle`` to compare.

A scheduler death (``move_scheduler``) makes nova's conductor roll the
move back as after any failure before compute.
"""

from __future__ import annotations

import dataclasses
import random
import uuid as uuidlib
from typing import Any, Mapping, Sequence

from scheduler_ext import errors
from scheduler_ext.lab import move_fleet
from scheduler_ext.lab.move_flows import (CLAIM_KILL_POINTS, FORBIDDEN_TRAIT, Flow,
                                          flavor_of)
from scheduler_ext.lab.move_reconcile import ReconcileService
from scheduler_ext.lab.move_scheduler import STOCK, OURS, Scheduler, SourceLast
from scheduler_ext.lab.nova_model import NovaModel, SchedulerUnreachable, Server
from scheduler_ext.moves.reconcile import MoveState
from scheduler_ext.placement import PlacementClient, allocations

__all__ = ["OURS", "STOCK", "Difference", "Outcome", "run_flow"]


@dataclasses.dataclass(frozen=True)
class Difference:
    """One way ours' end state differs from the expected (stock's):
    ``where`` is ``usage <provider>``, ``<consumer role> <provider>`` or
    ``verify <provider>``."""

    where: str
    rc: str
    expected: int
    actual: int

    def __str__(self) -> str:
        return f"{self.where} {self.rc}: expected {self.expected}, got {self.actual}"


@dataclasses.dataclass
class Outcome:
    """The end state of one run, by provider name and consumer role
    (``s<i>`` a server, ``s<i>.m<k>`` its k-th migration)."""

    usages: dict[str, dict[str, int]]
    consumers: dict[str, dict[str, dict[str, int]]]
    move_result: str            # "ok", "NoValidHost", "lost" (scheduler died)
    same_host: bool
    final_flavor_new: bool       # the mover ended with the new flavor
    killed: str                  # the kill point reached ("" none)
    decisions: list[Any]         # each scheduling call's selections
    move_call: int               # the index of the move's call (-1: none)
    source: str                  # the mover's host (uuid) when it moved
    verify: list[Difference]
    held: list[Difference]       # servers not holding their flavor and ports once
    mover_before: dict[str, dict[str, int]]
    new_flavor: dict[str, int]
    #: the hosts (uuids) prep_resize failed on, in order
    failed_on: list[str] = dataclasses.field(default_factory=list)


def _names(names: Mapping[str, str],
           allocs: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """``allocs`` by provider name, without zero amounts."""
    return {names.get(rp, rp): {rc: n for rc, n in res.items() if n}
            for rp, res in allocs.items() if any(res.values())}


class FlowRun:
    """One flow played with one strategy on one (empty) placement: the
    fleet, the scheduler and the reconcile (dying where told: ``kill``;
    the scheduler following ``follow``, another run's decisions), nova's
    model, the consumers' roles (``s<i>``, ``s<i>.m<k>``)."""

    def __init__(self, flow: Flow, strategy: str, client: PlacementClient,
                 kill: str, follow: Sequence[Any] | None, restart: bool = True,
                 fail_on: Sequence[str] | None = None):
        self.flow, self.strategy, self.client = flow, strategy, client
        #: the hosts prep_resize fails on (None: the flow's first
        #: ``prep_failures`` hosts chosen); ``failed_on`` where it did
        self.fail_on = None if fail_on is None else list(fail_on)
        self.failed_on: list[str] = []
        self.names = move_fleet.build(client, flow.shape, flow.vcpus)
        rng = random.Random(7)
        self.sched = Scheduler(client, strategy, flow.engine,
                               kill if kill in CLAIM_KILL_POINTS else "", follow)
        self.reconcile = ReconcileService(client, kill, flow.reconcile_write, restart)
        #: nova's own scheduler (an evacuation is never ours: see the adapter)
        self.stock_nova = Scheduler(client, STOCK, flow.engine, "", follow)
        # its calls are numbered with ours (the other run follows both)
        self.stock_nova.decisions = self.sched.decisions
        self.model = NovaModel(client, self.sched.select, uuid_factory=lambda: str(
            uuidlib.UUID(int=rng.getrandbits(128), version=4)))
        self.roles: dict[str, str] = {}
        self.mover: Server | None = None

    def boot_all(self) -> None:
        """Boot the flow's servers in order (those finding no host are
        skipped, in both runs alike)."""
        flow = self.flow
        for i, spec in enumerate(flow.servers):
            flavor, granular, extra = flavor_of(spec, flow.shape)
            forbidden = frozenset({FORBIDDEN_TRAIT}) \
                if flow.forbid and i == flow.mover else frozenset()
            try:
                server = self.model.boot(flavor, granular=granular, extra=extra,
                                         forbidden=forbidden)
            except errors.NoValidHost:
                continue
            self.roles[server.uuid] = f"s{i}"
            if i == flow.mover:
                self.mover = server

    def strand(self) -> None:
        """The flow's stranded server (if booted): its cold migration's
        conductor dies right after moving its allocations to the
        migration, a dead move only a reconcile repairs."""
        stranded = [u for u, r in self.roles.items() if r == f"s{self.flow.stranded}"]
        if stranded:
            self.model.migrate(stranded[0], conductor_dies=True)

    def play(self, mover: Server, new_flavor: dict[str, int],
             before: dict[str, dict[str, int]], next_boot: bool | None
             ) -> tuple[str, list[Difference]]:
        """The move, its failures and its end; then, after a scheduler
        death (or when ``next_boot`` says so: the other run's scheduler
        died), the next boot on the restarted scheduler before any
        reconcile."""
        flow, sched, model = self.flow, self.sched, self.model
        sched.dying.armed = True
        if flow.source_last:
            sched.move_ranking = SourceLast(mover.host)
        result, verify = _move(flow, model, mover.uuid, new_flavor, self.client,
                               self.names, self.stock_nova, self.strategy, before,
                               self.reconcile, self.fail_on, self.failed_on)
        sched.dying.armed = False
        if flow.end == "delete" and mover.uuid in model.servers:
            model.delete(mover.uuid)    # the user deletes it anyway
        if sched.dying.reached if next_boot is None else next_boot:
            flavor, granular, extra = flavor_of(flow.servers[flow.mover], flow.shape)
            try:
                self.roles[model.boot(flavor, granular=granular, extra=extra).uuid] = \
                    f"s{len(flow.servers)}"
            except errors.NoValidHost:
                pass
        return result, verify

    def end_state(self) -> tuple[dict, dict]:
        """(usage per provider, allocations per consumer role), by name."""
        for mig, owner in self.model.migration_owner.items():
            k = sum(1 for r in self.roles.values() if r.startswith(self.roles[owner] + ".m"))
            self.roles[mig] = f"{self.roles[owner]}.m{k}"
        usages, consumers = {}, {}
        for rp, name in self.names.items():
            usages[name] = {rc: n for rc, n in self.client.get_usages(rp).items() if n}
            for c in self.client.get_provider_allocations(rp):
                consumers[self.roles.get(c, c)] = _names(
                    self.names, self.client.get_consumer(c).allocations)
        return usages, consumers


def run_flow(flow: Flow, strategy: str, client: PlacementClient,
             kill: str | None = None, follow: Sequence[Any] | None = None,
             next_boot: bool | None = None, restart: bool = True,
             fail_on: Sequence[str] | None = None) -> Outcome:
    """Play ``flow`` with ``strategy`` on ``client`` (an empty placement),
    then one reconcile; ``kill`` overrides the flow's kill point;
    ``follow``: another run's decisions, preferred call by call;
    ``next_boot``: boot the next server after the move (None: when this
    run's scheduler died); ``restart`` False: no reconcile pass after the
    reconcile process died (what the restarted service's pass repairs);
    ``fail_on``: the hosts prep_resize fails on, each once when chosen
    (another run's ``failed_on``; None: the first ``flow.prep_failures``
    hosts chosen)."""
    run = FlowRun(flow, strategy, client,
                  flow.kill if kill is None else kill, follow, restart, fail_on)
    run.boot_all()
    run.strand()
    mover, model = run.mover, run.model
    result, before = "no server", {}
    verify: list[Difference] = []
    old_flavor = flavor_of(flow.servers[flow.mover], flow.shape)[0]
    new_flavor = flavor_of(flow.new, flow.shape)[0] if flow.move == "resize" \
        else dict(old_flavor)
    move_call, source = -1, ""
    if mover is not None:
        move_call, source = len(run.sched.decisions), mover.host
        before = _names(run.names, client.get_consumer(mover.uuid).allocations)
        result, verify = run.play(mover, new_flavor, before, next_boot)
    run.reconcile.run(model.states(), last=True)
    usages, consumers = run.end_state()
    held = _held(client, run.names, model, run.roles)
    live = mover is not None and mover.uuid in model.servers
    same = bool(mover and mover.moves and result == "ok"
                and mover.moves[-1].source == mover.moves[-1].dest)
    return Outcome(usages, consumers, result, same,
                   live and mover is not None and mover.flavor == new_flavor != old_flavor,
                   run.sched.dying.reached or run.reconcile.reached,
                   run.sched.decisions, move_call, source, verify, held, before,
                   new_flavor if live else {}, run.failed_on)


def _move(flow: Flow, model: NovaModel, uuid: str, new_flavor: dict[str, int],
          client: PlacementClient, names: Mapping[str, str], stock_nova: Scheduler,
          strategy: str, before: dict[str, dict[str, int]],
          reconcile: ReconcileService, fail_on: list[str] | None,
          failed_on: list[str]) -> tuple[str, list[Difference]]:
    verify: list[Difference] = []
    try:
        if flow.move == "live":
            model.live_migrate(uuid, fail=flow.end == "revert")
            return "ok", verify
        if flow.move == "evacuate":
            model.evacuate(uuid, stock_nova.select)
            return "ok", verify
        dies = flow.failure == "conductor_dies"
        if flow.move == "resize":
            move: MoveState | None = model.resize(uuid, new_flavor,
                                                  conductor_dies=dies)
        else:
            move = model.migrate(uuid, conductor_dies=dies)
        if dies:
            return "lost", verify
    except errors.NoValidHost:
        return "NoValidHost", verify
    except SchedulerUnreachable:
        return "lost", verify
    for _ in range(flow.prep_failures):
        assert move is not None
        if fail_on is not None:
            if move.dest not in fail_on:
                break
            fail_on.remove(move.dest)
        failed_on.append(move.dest)
        move = model.fail_on_destination(uuid)
        if move is None:
            return "ok", verify     # back on the source, old flavor
    if flow.failure == "resize_instance":
        model.fail_resize_instance(uuid)
        return "ok", verify
    if flow.failure == "finish_resize":
        model.fail_finish_resize(uuid)
        return "ok", verify
    # VERIFY_RESIZE
    assert move is not None
    if strategy == OURS and flow.verify_reconcile:
        state = model.state_of(uuid)
        assert state is not None
        reconcile.run([state])
    if move.source == move.dest and strategy == OURS and (
            flow.verify_reconcile or not flow.prep_failures):
        verify = _verify_same_host(client, names, before, uuid, move)
    if flow.end == "confirm":
        model.confirm(uuid)
    elif flow.end == "revert":
        model.revert(uuid)
    elif flow.end == "revert_fails":
        model.fail_revert(uuid)
    else:
        model.delete(uuid)
    return "ok", verify


def _held(client: PlacementClient, names: Mapping[str, str], model: NovaModel,
          roles: Mapping[str, str]) -> list[Difference]:
    """After the final reconcile: each live server holds, over its instance
    and migrations, exactly its live flavor and its ports' and devices'
    amounts once, all on its host's tree and sharing providers (what a
    deleted server's consumers keep is compared with stock's)."""
    out = []
    for uuid, role in roles.items():
        server = model.servers.get(uuid)
        if "." in role or server is None:
            continue
        consumers = [uuid] + [m for m, o in model.migration_owner.items() if o == uuid]
        held = _names(names, allocations.total(
            *(client.get_consumer(c).allocations for c in consumers)))
        want = dict(server.flavor)
        for group in server.extra:
            for rc, n in group.resources.items():
                want[rc] = want.get(rc, 0) + n
        host = names[server.host]
        for p in held:
            if not (p == host or p.startswith(host + "-") or p.startswith("ss")):
                out.append(Difference(f"held {role} {p}", "*", 0, 1))
        have = allocations.class_totals(held)
        for rc in sorted(set(want) | set(have)):
            if want.get(rc, 0) != have.get(rc, 0):
                out.append(Difference(f"held {role}", rc, want.get(rc, 0),
                                      have.get(rc, 0)))
    return out


def _verify_same_host(client: PlacementClient, names: Mapping[str, str],
                      old: dict[str, dict[str, int]], uuid: str,
                      move: MoveState) -> list[Difference]:
    """During VERIFY_RESIZE on the same host: per provider and class the
    server (instance and migration) holds max(old, new) of a flavor class
    on the provider that held it, a class only the new flavor has once,
    and every other class exactly as before. When the old or the new
    allocations use a device (``move_fleet.is_device``: nova gives the new
    flavor new devices), the server holds what stock holds instead
    (``_verify_beside_old``)."""
    instance = _names(names, client.get_consumer(uuid).allocations)
    migration = _names(names, client.get_consumer(move.migration_uuid).allocations)
    if any(map(move_fleet.is_device, [*old, *instance])):
        return _verify_beside_old(old, instance, migration, move)
    held = _names(names, allocations.total(instance, migration))
    need = {rp: dict(res) for rp, res in old.items()}
    for rc in set(move.old_resources) | set(move.new_resources):
        want = max(move.old_resources.get(rc, 0), move.new_resources.get(rc, 0))
        holders = [rp for rp, res in need.items() if res.get(rc)]
        if holders:
            need[holders[0]][rc] = want
        else:   # only the new flavor has it: wherever ours put it
            where = [rp for rp, res in held.items() if res.get(rc)] or ["(nowhere)"]
            need.setdefault(where[0], {})[rc] = want
    out = []
    for rp in sorted(set(need) | set(held)):
        for rc in sorted(set(need.get(rp, {})) | set(held.get(rp, {}))):
            e, a = need.get(rp, {}).get(rc, 0), held.get(rp, {}).get(rc, 0)
            if e != a:
                out.append(Difference(f"verify {rp}", rc, e, a))
    return out



def _verify_beside_old(old: dict[str, dict[str, int]],
                       instance: dict[str, dict[str, int]],
                       migration: dict[str, dict[str, int]],
                       move: MoveState) -> list[Difference]:
    """A same-host resize using a device, as stock holds it during
    VERIFY_RESIZE: the migration exactly the old allocations, the instance
    the new flavor (and the old classes no flavor names) once per class
    (where on the host is compared with stock's end state)."""
    out = [Difference(f"verify migration {rp}", rc, old.get(rp, {}).get(rc, 0),
                      migration.get(rp, {}).get(rc, 0))
           for rp in sorted(set(old) | set(migration))
           for rc in sorted(set(old.get(rp, {})) | set(migration.get(rp, {})))
           if old.get(rp, {}).get(rc, 0) != migration.get(rp, {}).get(rc, 0)]
    flavor = set(move.old_resources) | set(move.new_resources)
    want = dict(move.new_resources)
    for rc, n in allocations.class_totals(old).items():
        if rc not in flavor:
            want[rc] = n
    have = allocations.class_totals(instance)
    out += [Difference("verify instance", rc, want.get(rc, 0), have.get(rc, 0))
            for rc in sorted(set(want) | set(have)) if want.get(rc, 0) != have.get(rc, 0)]
    return out
