"""A model of what nova's conductor and compute write to placement.

Nova finishes every move without asking the scheduler; to prove our held
amounts safe we replay nova's own writes (modelled on nova 34's conductor
``MigrationTask`` and compute ``confirm_resize``/``revert_resize``/
``_revert_allocation``, no nova import):

* scheduling a move: the conductor first moves the instance's allocations to
  a new migration consumer (one POST), then asks the scheduler, which
  claims; on NoValidHost it moves them back;
* confirm: DELETE the migration's allocations (a 404 is ignored);
* revert, or a failure on the destination before the move completes: if
  the migration holds allocations they are moved onto the instance
  (replacing what it holds), otherwise nova logs an error and writes
  nothing;
* reschedule after such a failure: a new migration takes the instance's
  allocations again, and the conductor claims the next alternate's
  allocation request for the instance itself (PUT), without the scheduler;
  when none can be claimed it moves the allocations back;
* ``resize_instance`` failing on the source: compute moves the migration's
  allocations back (as a revert); ``finish_resize`` failing on the
  destination: compute deletes the migration's (as a confirm), the server
  stays there with the new flavor; a revert failing on the destination
  writes nothing (the server stays there, in error);
* live migration: the conductor moves the allocations to a migration, then
  asks the scheduler for another host (no move context: the adapter sees
  no resize or cold migration); success deletes the migration's
  allocations, a failure moves them back;
* evacuation: no migration consumer; the instance keeps its source
  allocations and nova's own scheduler adds the destination's providers it
  does not hold yet (``evacuate``); the source compute, back up, removes
  its tree from the instance's allocations;
* the scheduler lost mid-call (its process died): the conductor's call
  times out and it rolls back as for a failure before compute
  (``SchedulerUnreachable``).

A server's request is its flavor (``flavor``: units per class, the classes
a reconcile manages) with the classes in ``granular`` asked as one
single-provider group each, plus ``extra`` groups (ports' bandwidth, PCI
devices), which a resize keeps.

Used by ``scheduler-ext simulate`` and by the tests.
"""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from typing import Callable, Mapping

from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.placement import (AllocationWrite, Allocations, PlacementClient,
                                     allocations)
from scheduler_ext.moves.reconcile import InstanceState, MoveState
from scheduler_ext.moves.request import MoveContext, ScheduleRequest
from scheduler_ext.lab.server_query import AvoidHosts, query
from scheduler_ext.placement.query import RequestGroup
from scheduler_ext.sources.base import Candidate

LOG = logging.getLogger(__name__)

#: select_destinations(request, ranking=None)
Scheduler = Callable[..., list[list[Candidate]]]


class SchedulerUnreachable(errors.SchedulerExtError):
    """The conductor's call to the scheduler failed without an answer (the
    scheduler process died): the move was rolled back as nova does."""


@dataclasses.dataclass
class Server:
    uuid: str
    flavor: dict[str, int]
    host: str
    moves: list[MoveState] = dataclasses.field(default_factory=list)
    alternates: list[Candidate] = dataclasses.field(default_factory=list)
    granular: tuple[str, ...] = ()
    extra: tuple[RequestGroup, ...] = ()
    forbidden: frozenset[str] = frozenset()

    @property
    def active(self) -> MoveState | None:
        return self.moves[-1] if self.moves and self.moves[-1].in_progress else None


class NovaModel:
    """Servers on a fleet, moved the way nova moves them."""

    def __init__(self, client: PlacementClient, scheduler: Scheduler,
                 project_id: str = "project", user_id: str = "user",
                 uuid_factory: Callable[[], str] | None = None):
        self.client = client
        self.scheduler = scheduler
        self.project_id = project_id
        self.user_id = user_id
        self.servers: dict[str, Server] = {}
        #: migration uuid -> the server it moved (kept after the move ends)
        self.migration_owner: dict[str, str] = {}
        self._uuid = uuid_factory or (lambda: str(uuidlib.uuid4()))

    # ------------------------------------------------------------ helpers
    def _move_allocations(self, src: str, dst: str, dst_type: str) -> None:
        """nova's move_allocations: what ``src`` holds replaces what ``dst``
        holds, in one write; nothing happens when ``src`` holds nothing."""
        s, d = self.client.get_consumer(src), self.client.get_consumer(dst)
        if not s.allocations:
            return
        self.client.post_allocations({
            src: AllocationWrite({}, self.project_id, self.user_id,
                                 s.generation, s.consumer_type or "INSTANCE"),
            dst: AllocationWrite(s.allocations, self.project_id, self.user_id,
                                 d.generation, dst_type)})

    def _request(self, server: Server, resources: Mapping[str, int],
                 move: MoveContext | None) -> ScheduleRequest:
        return ScheduleRequest((server.uuid,), query(
            resources, server.granular, server.extra, server.forbidden),
            self.project_id, self.user_id, move=move)

    # ---------------------------------------------------------- lifecycle
    def boot(self, flavor: Mapping[str, int], server_uuid: str | None = None,
             granular: tuple[str, ...] = (),
             extra: tuple[RequestGroup, ...] = (),
             forbidden: frozenset[str] = frozenset()) -> Server:
        server_uuid = server_uuid or self._uuid()
        server = Server(server_uuid, dict(flavor), "", granular=granular,
                        extra=extra, forbidden=forbidden)
        selections = self.scheduler(self._request(server, flavor, None))[0]
        server.host, server.alternates = selections[0].root, selections[1:]
        self.servers[server_uuid] = server
        return server

    def place(self, flavor: Mapping[str, int],
              allocs: Allocations, host: str) -> Server:
        """A server booted on ``host`` with ``allocs`` claimed directly
        (nova's conductor claiming a forced host, one PUT); Conflict when
        placement refuses it, and then nothing is recorded."""
        server_uuid = self._uuid()
        self.client.put_allocations(server_uuid, AllocationWrite(
            allocs, self.project_id, self.user_id, None, "INSTANCE"))
        server = Server(server_uuid, dict(flavor), host)
        self.servers[server_uuid] = server
        return server

    def owner_of(self, consumer: str) -> str | None:
        """The live server whose instance or migration ``consumer`` is."""
        if consumer in self.servers:
            return consumer
        owner = self.migration_owner.get(consumer)
        return owner if owner in self.servers else None

    def state_of(self, server_uuid: str) -> InstanceState | None:
        """What nova knows of one live server (None once deleted)."""
        s = self.servers.get(server_uuid)
        if s is None:
            return None
        return InstanceState(s.uuid, s.host, dict(s.flavor), self.project_id,
                             self.user_id, tuple(s.moves))

    def resize(self, server_uuid: str, flavor: Mapping[str, int],
               allow_same_host: bool = True,
               conductor_dies: bool = False) -> MoveState:
        """Conductor: swap to a migration, schedule; NoValidHost reverts.
        ``conductor_dies``: the conductor process dies right after the swap
        (the migration holds everything, the instance nothing; the move is
        dead, nothing more is written) and the dead move is returned."""
        server = self.servers[server_uuid]
        if server.active:
            raise errors.InvalidRequest(
                f"server {server_uuid} already has move "
                f"{server.active.migration_uuid} in progress",
                field="server", value=server_uuid)
        migration = self._uuid()
        self.migration_owner[migration] = server_uuid
        # nova records the migration before it touches placement: if the
        # conductor dies half-way, reconcile still knows the consumer
        server.moves.append(MoveState(migration, server.host, server.host,
                                      dict(server.flavor), dict(flavor), False))
        self._move_allocations(server.uuid, migration, "MIGRATION")
        if conductor_dies:
            return server.moves[-1]
        move = MoveContext(migration, server.host, dict(server.flavor),
                           allow_same_host)
        try:
            selections = self.scheduler(self._request(server, flavor, move))[0]
        except (errors.NoValidHost, SchedulerUnreachable):
            self._move_allocations(migration, server.uuid, "INSTANCE")
            raise
        state = MoveState(migration, server.host, selections[0].root,
                          dict(server.flavor), dict(flavor), True)
        server.moves[-1] = state
        server.alternates = selections[1:]
        return state

    def migrate(self, server_uuid: str, conductor_dies: bool = False) -> MoveState:
        """Cold migration: same flavor, never the same host."""
        return self.resize(server_uuid, self.servers[server_uuid].flavor,
                           allow_same_host=False, conductor_dies=conductor_dies)

    def _finish(self, server: Server, host: str, flavor: Mapping[str, int]) -> None:
        move = self._active(server)
        server.moves[-1] = dataclasses.replace(move, in_progress=False)
        server.host, server.flavor = host, dict(flavor)

    # nova records each transition (migration status, instance host and
    # flavor) before it writes to placement, so whatever a dead process
    # left half-done, reconcile knows the state it was heading for.
    def confirm(self, server_uuid: str) -> None:
        server = self.servers[server_uuid]
        move = self._active(server)
        self._finish(server, move.dest, move.new_resources)
        try:
            self.client.delete_allocations(move.migration_uuid)
        except errors.NotFound:
            pass

    def revert(self, server_uuid: str) -> None:
        server = self.servers[server_uuid]
        move = self._active(server)
        self._finish(server, move.source, move.old_resources)
        self._revert_allocation(server, move)

    def _revert_allocation(self, server: Server, move: MoveState) -> None:
        if not self.client.get_consumer(move.migration_uuid).allocations:
            LOG.error("migration %s holds no allocations: nothing to move back "
                      "to instance %s", move.migration_uuid, server.uuid)
            return
        self._move_allocations(move.migration_uuid, server.uuid, "INSTANCE")

    def fail_on_destination(self, server_uuid: str) -> MoveState | None:
        """prep_resize fails on the chosen host: compute reverts the
        allocation, the conductor reschedules to the alternates. Returns the
        new move, or None when no alternate could be claimed (the server is
        back on its source with its old flavor)."""
        server = self.servers[server_uuid]
        move = self._active(server)
        server.moves[-1] = dataclasses.replace(move, in_progress=False)
        self._revert_allocation(server, move)
        migration = self._uuid()
        self.migration_owner[migration] = server_uuid
        server.moves.append(MoveState(migration, move.source, move.source,
                                      dict(move.old_resources),
                                      dict(move.new_resources), False))
        self._move_allocations(server.uuid, migration, "MIGRATION")
        alternates = [a for a in server.alternates if a.root != move.dest]
        for alt in alternates:
            inst = self.client.get_consumer(server.uuid)
            try:
                self.client.put_allocations(server.uuid, AllocationWrite(
                    alt.allocations, self.project_id, self.user_id,
                    inst.generation, "INSTANCE"))
            except errors.Conflict as exc:
                LOG.info("alternate %s refused: %s", alt.root, exc)
                continue
            state = MoveState(migration, move.source, alt.root,
                              dict(move.old_resources), dict(move.new_resources),
                              True)
            server.moves[-1] = state
            server.alternates = [a for a in alternates if a.root != alt.root]
            return state
        self._move_allocations(migration, server.uuid, "INSTANCE")
        server.alternates = []
        return None

    def fail_resize_instance(self, server_uuid: str) -> None:
        """``resize_instance`` fails on the source: compute moves the
        migration's allocations back; the server stays on its source with
        its old flavor (in error)."""
        server = self.servers[server_uuid]
        move = self._active(server)
        self._finish(server, move.source, move.old_resources)
        self._revert_allocation(server, move)

    def fail_finish_resize(self, server_uuid: str) -> None:
        """``finish_resize`` fails on the destination: compute deletes the
        migration's allocations (as a confirm); the server stays on the
        destination with the new flavor (in error)."""
        self.confirm(server_uuid)

    def fail_revert(self, server_uuid: str) -> None:
        """``revert_resize`` fails on the destination before anything is
        moved back: nothing is written; the server stays on the destination
        with the new flavor (in error), the migration in error."""
        server = self.servers[server_uuid]
        move = self._active(server)
        self._finish(server, move.dest, move.new_resources)

    def live_migrate(self, server_uuid: str, fail: bool = False) -> MoveState:
        """The conductor moves the allocations to a migration and asks for
        another host (no move context, the source ranked out); the move
        completes at once (the migration's allocations deleted) or, with
        ``fail``, rolls back (moved back to the instance). NoValidHost and
        SchedulerUnreachable roll back before re-raising."""
        server = self.servers[server_uuid]
        migration = self._uuid()
        self.migration_owner[migration] = server_uuid
        server.moves.append(MoveState(migration, server.host, server.host,
                                      dict(server.flavor), dict(server.flavor),
                                      False))
        self._move_allocations(server.uuid, migration, "MIGRATION")
        try:
            selections = self.scheduler(
                self._request(server, server.flavor, None),
                ranking=AvoidHosts({server.host}))[0]
        except (errors.NoValidHost, SchedulerUnreachable):
            self._move_allocations(migration, server.uuid, "INSTANCE")
            raise
        state = MoveState(migration, server.host, selections[0].root,
                          dict(server.flavor), dict(server.flavor), True)
        server.moves[-1] = state
        if fail:
            self.revert(server_uuid)
        else:
            self.confirm(server_uuid)
        return state

    def evacuate(self, server_uuid: str, pick: Scheduler) -> str:
        """The source host is down; nova's own scheduler (``pick``: a
        scheduler the request goes to with the instance's allocations moved
        aside to a scratch consumer, so it claims as for a new consumer)
        chooses another host; the instance then holds its source
        allocations plus the destination's providers it does not hold yet
        (nova's claim for an evacuation, which counts a sharing provider
        once); the source compute, back up, removes its tree. Returns the
        destination."""
        server = self.servers[server_uuid]
        migration = self._uuid()
        self.migration_owner[migration] = server_uuid
        old = allocations.copy(self.client.get_consumer(server.uuid).allocations)
        self._move_allocations(server.uuid, migration, "MIGRATION")
        try:
            chosen = pick(self._request(server, server.flavor, None),
                          ranking=AvoidHosts({server.host}))[0][0]
        except (errors.NoValidHost, SchedulerUnreachable):
            self._move_allocations(migration, server.uuid, "INSTANCE")
            raise
        both = allocations.copy(old)
        for rp, res in chosen.allocations.items():
            if rp not in both:
                both[rp] = dict(res)
        inst = self.client.get_consumer(server.uuid)
        self.client.post_allocations({
            migration: AllocationWrite({}, self.project_id, self.user_id,
                                       self.client.get_consumer(migration).generation,
                                       "MIGRATION"),
            server.uuid: AllocationWrite(both, self.project_id, self.user_id,
                                         inst.generation, "INSTANCE")})
        source = server.host
        server.host = chosen.root
        inst = self.client.get_consumer(server.uuid)
        kept = {rp: res for rp, res in inst.allocations.items()
                if self.client.get_provider(rp).root_provider_uuid != source}
        self.client.put_allocations(server.uuid, AllocationWrite(
            kept, self.project_id, self.user_id, inst.generation, "INSTANCE"))
        return chosen.root

    def delete(self, server_uuid: str) -> None:
        """Deleting a server in VERIFY_RESIZE confirms the resize first."""
        server = self.servers[server_uuid]
        if server.active:
            self.confirm(server_uuid)
        try:
            self.client.delete_allocations(server_uuid)
        except errors.NotFound:
            pass
        del self.servers[server_uuid]

    @staticmethod
    def _active(server: Server) -> MoveState:
        if server.active is None:
            raise errors.InvalidRequest(
                f"server {server.uuid} has no move in progress",
                field="server", value=server.uuid)
        return server.active

    def states(self) -> list[InstanceState]:
        """What nova knows, in the form reconcile takes."""
        return [InstanceState(s.uuid, s.host, dict(s.flavor), self.project_id,
                              self.user_id, tuple(s.moves))
                for s in self.servers.values()]

