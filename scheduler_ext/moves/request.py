"""The scheduler's own request type (nova-free).

A ``ScheduleRequest`` is one placement query (``CandidateRequest``, the one
query type) plus who is being placed and, for a move, the move's context.
The nova adapter builds it from a RequestSpec (and the move's Migration);
everything below the adapter speaks only this. The answer is, per
instance, the claimed ``sources.base.Candidate`` then its alternates.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from scheduler_ext.placement import ConsumerAllocations, validation
from scheduler_ext.placement.query import CandidateRequest


@dataclasses.dataclass(frozen=True)
class MoveContext:
    """What the driver needs to know about a move (resize, cold migration).

    ``source_root`` is the compute node provider the server runs on;
    ``old_resources`` the flavor it runs with (units of each class);
    the old allocations themselves are read from placement (nova's conductor
    has moved them to the migration consumer before scheduling);
    ``migration_held`` is that consumer as read when the move was found
    (its generation guards the claim), or None to read it again.
    """

    migration_uuid: str
    source_root: str
    old_resources: Mapping[str, int]
    allow_same_host: bool = True
    migration_held: ConsumerAllocations | None = None


@dataclasses.dataclass(frozen=True)
class ScheduleRequest:
    """One scheduling question for one or more identical servers.

    ``query`` holds the (new) flavor's amounts per resource class and every
    trait, aggregate and tree filter, validated when it was built.
    """

    instance_uuids: tuple[str, ...]
    query: CandidateRequest
    project_id: str
    user_id: str
    move: MoveContext | None = None

    def __post_init__(self) -> None:
        check(self)

    @property
    def resources(self) -> Mapping[str, int]:
        """The amounts asked for, per resource class (units)."""
        return self.query.resources


def check(req: ScheduleRequest) -> None:
    """Raise InvalidRequest naming the first bad field; checks only what can
    be checked without placement (the fleet is checked by the driver) and
    what the query has not checked already."""
    if not req.instance_uuids:
        raise validation.bad("instance_uuids", req.instance_uuids,
                             "at least one instance is needed")
    for i, u in enumerate(req.instance_uuids):
        validation.uuid(u, f"instance_uuids[{i}]")
    if len(set(req.instance_uuids)) != len(req.instance_uuids):
        raise validation.bad("instance_uuids", req.instance_uuids,
                             "the same instance appears twice")
    if not isinstance(req.query, CandidateRequest):
        raise validation.bad("query", req.query, "must be a CandidateRequest")
    for field in ("project_id", "user_id"):
        value = getattr(req, field)
        if not isinstance(value, str) or not value:
            raise validation.bad(field, value, "must be a non-empty string")
    if req.move is not None:
        _check_move(req)


def _check_move(req: ScheduleRequest) -> None:
    move = req.move
    if len(req.instance_uuids) != 1:
        raise validation.bad("instance_uuids", req.instance_uuids,
                             "a move schedules exactly one instance")
    if not isinstance(move, MoveContext):
        raise validation.bad("move", move, "must be a MoveContext")
    validation.uuid(move.migration_uuid, "move.migration_uuid")
    if move.source_root is None:
        raise validation.bad("move.source_root", None,
                             "a move needs its source compute node")
    validation.uuid(move.source_root, "move.source_root")
    if move.migration_uuid.lower() == req.instance_uuids[0].lower():
        raise validation.bad("move.migration_uuid", move.migration_uuid,
                             "equals the instance uuid; a migration is "
                             "its own consumer")
    old = move.old_resources
    if not isinstance(old, Mapping) or not old:
        raise validation.bad("move.old_resources", old,
                             "must map at least one resource class to an amount")
    for rc, n in old.items():
        validation.resource_class(rc, "move.old_resources resource class")
        validation.integer(n, f"move.old_resources[{rc}]", 1)
