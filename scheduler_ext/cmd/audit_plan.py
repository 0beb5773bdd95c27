"""The findings of ``scheduler-ext audit`` and how its fixes are applied:
one atomic write each, in order, stopping at the first error."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Iterable, Iterator

from scheduler_ext import errors
from scheduler_ext.cmd import common
from scheduler_ext.lab import invariants
from scheduler_ext.moves.placing import Uncertain
from scheduler_ext.moves.reconcile import InstanceState, Reconciler
from scheduler_ext.placement import AllocationWrite, PlacementClient, allocations


@dataclasses.dataclass
class AuditFix:
    """One atomic write of the audit's plan: ``subject`` (an instance,
    from the reconcile's ``Fix``, or an unknown consumer), why, the write,
    and how applying it went."""

    subject: str
    reason: str
    writes: dict[str, AllocationWrite]
    state: str = "planned"      # planned, applied, failed, not attempted
    error: str = ""


@dataclasses.dataclass
class Findings:
    provider_problems: list[str] = dataclasses.field(default_factory=list)
    migration_allocations: list[str] = dataclasses.field(default_factory=list)
    unknown_consumers: list[str] = dataclasses.field(default_factory=list)
    unfixable: list[str] = dataclasses.field(default_factory=list)
    fixes: list[AuditFix] = dataclasses.field(default_factory=list)
    left_alone: list[str] = dataclasses.field(default_factory=list)
    instances: int | None = None
    after_apply: list[str] | None = None

    @staticmethod
    def columns() -> tuple[str, ...]:
        return ("kind", "subject", "detail", "state")

    def rows(self, applying: bool) -> Iterator[tuple[str, str, str, str]]:
        """One row per finding and per fix (its state: would apply,
        applied, failed, not attempted)."""
        for p in self.provider_problems:
            yield "provider problem", "", p, ""
        for m in self.migration_allocations:
            yield "migration allocation", "", m, ""
        for u in self.unknown_consumers:
            yield "unknown consumer", "", u, ""
        for u in self.unfixable:
            yield "cannot fix", "", u, ""
        for u in self.left_alone:
            yield ("left alone", f"instance {u}",
                   "a task is running or a move is being confirmed", "")
        for f in self.fixes:
            yield ("fix", f.subject, f.reason,
                   "would apply" if f.state == "planned" else f.state)
        for p in self.after_apply or ():
            yield "provider problem after the fixes", "", p, ""

    def apply(self, client: PlacementClient) -> int | None:
        """Write the fixes in order, saying each on stderr; at the first
        error stop and say what was and was not written. The exit code on
        an error, else None."""
        total = len(self.fixes)
        for k, fix in enumerate(self.fixes, 1):
            try:
                client.post_allocations(fix.writes)
            except errors.PlacementError as exc:
                fix.state, fix.error = "failed", str(exc)
                for rest in self.fixes[k:]:
                    rest.state = "not attempted"
                done = [f.subject for f in self.fixes if f.state == "applied"]
                _say(f"fix {k}/{total} FAILED: {fix.subject}: {exc}")
                _say(f"stopped: {len(done)} fix(es) written "
                     f"({', '.join(done) or 'none'}); this one and "
                     f"{total - k} after it not written")
                return (common.UNREACHABLE
                        if isinstance(exc, errors.PlacementUnavailable)
                        else common.FINDINGS)
            fix.state = "applied"
            _say(f"fix {k}/{total} applied: {fix.subject}: {fix.reason}")
        self.after_apply = invariants.check_providers(client)
        return None

    def open_findings(self) -> bool:
        """Something is still wrong (or only planned)."""
        if self.after_apply is not None:
            return bool(self.after_apply or self.unfixable or
                        self.unknown_consumers and not self.fixes)
        return bool(self.provider_problems or self.unknown_consumers or
                    self.unfixable or self.fixes)

    def summary(self, applied: bool) -> str:
        states = {s: sum(f.state == s for f in self.fixes)
                  for s in ("applied", "failed", "not attempted")}
        text = (f"{len(self.provider_problems)} provider problems, "
                f"{len(self.migration_allocations)} migration allocations, "
                f"{len(self.unknown_consumers)} unknown consumers, "
                f"{len(self.fixes)} reconcile fixes")
        if applied:
            text += (f": {states['applied']} applied, {states['failed']} failed, "
                     f"{states['not attempted']} not attempted")
            if self.after_apply is not None:
                text += f"; after the fixes {len(self.after_apply)} provider problems"
        elif self.fixes:
            text += " (dry run: --apply writes them)"
        return text

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["fixes"] = [{"subject": f.subject, "reason": f.reason,
                         "state": f.state, "error": f.error} for f in self.fixes]
        return out


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _unknown_fix(client: PlacementClient, consumer: str) -> AuditFix:
    held = client.get_consumer(consumer)
    return AuditFix(f"consumer {consumer}",
                    f"holds {allocations.copy(held.allocations)} but nova knows no "
                    "such instance or migration: delete its allocations",
                    {consumer: held.write({})})


def examine(client: PlacementClient, states: Iterable[InstanceState] | None,
            known: frozenset[str] | None) -> Findings:
    """Everything the audit finds; fixes planned (nothing written).
    ``known`` (from nova) makes consumers outside it unknown, with a fix."""
    found = Findings()
    consumers: set[str] = set()
    found.provider_problems = invariants.check_providers(client, consumers)
    names = {p.uuid: p.name for p in client.list_providers()}
    listed = set(known or ()) | {s.uuid for s in states or ()} | {
        m.migration_uuid for s in states or () for m in s.moves}
    for c in sorted(consumers):
        held = client.get_consumer(c)
        if held.consumer_type == "MIGRATION" and held.allocations:
            found.migration_allocations.append(
                f"migration {c} holds allocations on "
                + ", ".join(names.get(rp, rp) for rp in held.allocations))
        if states is not None and c not in listed:
            found.unknown_consumers.append(
                f"{c} ({held.consumer_type or 'no type'}, project "
                f"{held.project_id}) holds {allocations.copy(held.allocations)}")
            if known is not None:
                found.fixes.append(_unknown_fix(client, c))
    if states is None:
        return found
    states = list(states)
    found.instances = len(states)
    reconciler = Reconciler(client)
    for state in states:
        try:
            fix = reconciler.plan(state)
        except (errors.PlacementError, Uncertain) as exc:
            found.unfixable.append(f"instance {state.uuid}: {exc}")
            continue
        if fix is not None:
            found.fixes.append(AuditFix(f"instance {state.uuid}", fix.reason,
                                        dict(fix.writes)))
    return found
