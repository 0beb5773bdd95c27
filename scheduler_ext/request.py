"""The scheduler's own request type (nova-free).

The nova adapter turns a RequestSpec (and, for a move, its Migration) into a
``ScheduleRequest``; everything below the adapter speaks only this.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from scheduler_ext.placement import validation


@dataclasses.dataclass(frozen=True)
class MoveContext:
    """What the driver needs to know about a move (resize, cold migration).

    ``source_root`` is the compute node provider the server runs on;
    ``old_resources`` the flavor it runs with (units of each class);
    the old allocations themselves are read from placement (nova's conductor
    has moved them to the migration consumer before scheduling).
    """

    migration_uuid: str
    source_root: str
    old_resources: Mapping[str, int]
    allow_same_host: bool = True


@dataclasses.dataclass(frozen=True)
class ScheduleRequest:
    """One scheduling question for one or more identical servers.

    ``resources`` are the (new) flavor's amounts per resource class.
    Trait and aggregate filters follow placement's GET /allocation_candidates
    meaning: ``member_of`` is a tuple of any-of sets that must all match,
    ``any_traits`` a tuple of any-of trait sets.
    """

    instance_uuids: tuple[str, ...]
    resources: Mapping[str, int]
    project_id: str
    user_id: str
    required_traits: frozenset[str] = frozenset()
    forbidden_traits: frozenset[str] = frozenset()
    any_traits: tuple[frozenset[str], ...] = ()
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggregates: frozenset[str] = frozenset()
    in_tree: str | None = None
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    move: MoveContext | None = None

    def __post_init__(self) -> None:
        check(self)


def check(req: ScheduleRequest) -> None:
    """Raise InvalidRequest naming the first bad field; checks only what can
    be checked without placement (the fleet is checked by the driver)."""
    if not req.instance_uuids:
        raise validation.bad("instance_uuids", req.instance_uuids,
                             "at least one instance is needed")
    for i, u in enumerate(req.instance_uuids):
        validation.uuid(u, f"instance_uuids[{i}]")
    if len(set(req.instance_uuids)) != len(req.instance_uuids):
        raise validation.bad("instance_uuids", req.instance_uuids,
                             "the same instance appears twice")
    _resources(req.resources, "resources")
    for field in ("project_id", "user_id"):
        value = getattr(req, field)
        if not isinstance(value, str) or not value:
            raise validation.bad(field, value, "must be a non-empty string")
    for field in ("required_traits", "forbidden_traits", "root_required",
                  "root_forbidden"):
        validation.names(getattr(req, field), validation.trait, field)
    for group in req.any_traits:
        validation.names(group, validation.trait, "any_traits")
    for group in req.member_of:
        validation.names(group, validation.uuid, "member_of")
    validation.names(req.forbidden_aggregates, validation.uuid,
                     "forbidden_aggregates")
    both = req.required_traits & req.forbidden_traits
    if both:
        raise validation.bad("forbidden_traits", sorted(both),
                             "also required")
    if req.in_tree is not None:
        validation.uuid(req.in_tree, "in_tree")
    move = req.move
    if move is not None:
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
        _resources(move.old_resources, "move.old_resources")


def _resources(resources: Mapping[str, int], field: str) -> None:
    if not isinstance(resources, Mapping) or not resources:
        raise validation.bad(field, resources,
                             "must map at least one resource class to an amount")
    for rc, n in resources.items():
        validation.resource_class(rc, f"{field} resource class")
        validation.integer(n, f"{field}[{rc}]", 1)
