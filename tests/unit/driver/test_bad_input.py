"""Bad input to the driver and reconcile: a typed error naming what was
wrong, and placement exactly as it was."""

import uuid

import pytest

from scheduler_ext import errors
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.moves.reconcile import Reconciler
from scheduler_ext.moves.request import MoveContext, ScheduleRequest
from scheduler_ext.placement.query import CandidateRequest
from tests.unit.helpers import FLAVOR1, FLAVOR2, dump, small_host, start

INSTANCE = str(uuid.UUID(int=1))
MIGRATION = str(uuid.UUID(int=2))


@pytest.fixture
def booted():
    client = EmbeddedPlacement()
    host = small_host(client)
    drv, model = start(client)
    model.boot(FLAVOR1, INSTANCE)
    return client, host, drv, model


def _move(host, **changes):
    """A resize request's fields with ``changes``; the query fields
    (resources, traits, aggregates) go into its CandidateRequest."""
    query = {"resources": FLAVOR2}
    for name in ("resources", "required", "forbidden", "member_of"):
        if name in changes:
            query[name] = changes.pop(name)
    fields = dict(instance_uuids=(INSTANCE,), project_id="p", user_id="u",
                  move=MoveContext(MIGRATION, host, FLAVOR1))
    fields.update(changes)
    return ScheduleRequest(query=CandidateRequest(**query), **fields)


@pytest.mark.parametrize("changes, field", [
    (lambda host: {"move": MoveContext(MIGRATION, None, FLAVOR1)}, "move.source_root"),
    (lambda host: {"move": MoveContext(INSTANCE, host, FLAVOR1)}, "move.migration_uuid"),
    (lambda host: {"move": MoveContext("not-a-uuid", host, FLAVOR1)}, "move.migration_uuid"),
    (lambda host: {"resources": {"VCPUS": 2}}, "resources"),
    (lambda host: {"resources": {"VCPU": 0}}, "resources[VCPU]"),
    (lambda host: {"resources": {"VCPU": -1}}, "resources[VCPU]"),
    (lambda host: {"resources": {}}, "resources"),
    (lambda host: {"instance_uuids": ()}, "instance_uuids"),
    (lambda host: {"instance_uuids": (INSTANCE, INSTANCE)}, "instance_uuids"),
    (lambda host: {"required": frozenset({"HW_CPU_X86_AVX2"}),
                   "forbidden": frozenset({"HW_CPU_X86_AVX2"})}, "required"),
    (lambda host: {"required": frozenset({"NOT_A_TRAIT"})}, "required"),
    (lambda host: {"member_of": (frozenset({"agg"}),)}, "member_of"),
    (lambda host: {"move": MoveContext(MIGRATION, host, {"VCPU": -2})}, "move.old_resources[VCPU]"),
])
def test_malformed_request_is_refused_by_name(booted, changes, field):
    client, host, drv, model = booted
    before = dump(client)
    with pytest.raises(errors.InvalidRequest) as exc:
        drv.select_destinations(_move(host, **changes(host)))
    assert exc.value.field == field
    assert field.split("[")[0].split(" ")[0] in str(exc.value)
    assert dump(client) == before


def test_unknown_source_host_is_refused(booted):
    client, host, drv, model = booted
    before = dump(client)
    ghost = str(uuid.UUID(int=99))
    with pytest.raises(errors.InvalidRequest, match="move.source_root") as exc:
        drv.select_destinations(_move(ghost))
    assert exc.value.value == ghost
    assert dump(client) == before


def test_custom_class_no_provider_has_gives_no_valid_host(booted):
    client, host, drv, model = booted
    before = dump(client)
    with pytest.raises((errors.NoValidHost, errors.InvalidRequest), match="CUSTOM_GPU"):
        drv.select_destinations(ScheduleRequest(
            (str(uuid.UUID(int=5)),), CandidateRequest({"CUSTOM_GPU": 1}), "p", "u"))
    assert dump(client) == before


def test_unknown_strategy_name_is_refused():
    client = EmbeddedPlacement()
    with pytest.raises(errors.ConfigError, match="nonesuch") as exc:
        start(client, "nonesuch")
    assert exc.value.option == "move_strategy"


class Down:
    """A placement whose writes are refused (down, or a 409)."""

    def __init__(self, inner, exc):
        self.inner, self.exc = inner, exc

    def __getattr__(self, name):
        if name in ("put_allocations", "post_allocations", "delete_allocations"):
            def refuse(*a, **kw):
                raise self.exc
            return refuse
        return getattr(self.inner, name)


@pytest.mark.parametrize("exc, raised, says", [
    # placement down: said as such, no claim tried elsewhere
    (errors.PlacementUnavailable("placement down"), errors.PlacementUnavailable,
     "503 placement.undefined_code: placement down"),
    # a 409 on the consumer: the same host tried again, max_claim_attempts times
    (errors.ConcurrentUpdate("consumer generation conflict"), errors.NoValidHost,
     "every claim failed (" + "; ".join(["{host}: consumer generation conflict"] * 3)),
    # the host is full after all: the next candidate (there is none)
    (errors.CapacityExceeded("unable to allocate inventory"), errors.NoValidHost,
     "every claim failed ({host}: unable to allocate inventory)")])
def test_claim_refused_by_placement_changes_nothing(exc, raised, says):
    client = EmbeddedPlacement()
    host = small_host(client)
    drv, _ = start(Down(client, exc))
    before = dump(client)
    with pytest.raises(errors.SchedulerExtError) as info:
        drv.select_destinations(ScheduleRequest(
            (INSTANCE,), CandidateRequest(FLAVOR1), "p", "u"))
    assert type(info.value) is raised
    assert says.format(host=host) in str(info.value)
    if raised is errors.NoValidHost:
        assert str(info.value).startswith(f"instance {INSTANCE}: ")
    assert dump(client) == before


@pytest.mark.parametrize("exc", [
    errors.PlacementUnavailable("placement down"),
    errors.ConcurrentUpdate("consumer generation conflict")])
def test_reconcile_refused_by_placement_reports_and_changes_nothing(booted, exc):
    client, host, drv, model = booted
    model.resize(INSTANCE, FLAVOR2)
    model.revert(INSTANCE)
    before = dump(client)
    fixes = Reconciler(Down(client, exc)).run(model.states(), apply=True)
    assert len(fixes) == 1 and not fixes[0].applied
    assert str(exc) in fixes[0].error
    assert dump(client) == before
