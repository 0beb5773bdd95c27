"""What a simulation run records: counts per operation, invariant
violations, and a timeline of samples for plots and ``--json``."""

from __future__ import annotations

import collections
import dataclasses
import random
from typing import Any, Generic, Hashable, TypeVar

#: the operations a table line shows, in order ("reconcile fixes" is a count)
OPERATIONS = ("boot", "resize", "resize same host", "migrate", "confirm",
              "revert", "reschedule", "delete", "reconcile fixes")
#: violations kept verbatim (all are counted)
KEEP_VIOLATIONS = 200


@dataclasses.dataclass
class Tally:
    """One strategy's run. ``counts[op + " ok"|" failed"]``; ``timeline``
    holds one dict per sample (see ``RandomRun.sample``); ``checks`` counts
    touched-set and full invariant checks."""

    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    violations: list[str] = dataclasses.field(default_factory=list)
    violation_count: int = 0
    final: tuple | None = None
    timeline: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    checks: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    seconds: float = 0.0

    def violation(self, text: str) -> None:
        self.violation_count += 1
        if len(self.violations) < KEEP_VIOLATIONS:
            self.violations.append(text)

    def ratio(self, op: str) -> tuple[int, int]:
        """(succeeded, attempted) of ``op``."""
        ok = self.counts[op + " ok"]
        return ok, ok + self.counts[op + " failed"]

    def line(self, name: str) -> str:
        parts = [f"{op} {self.counts[op]}" if op == "reconcile fixes"
                 else "%s %d/%d" % ((op,) + self.ratio(op)) for op in OPERATIONS]
        return f"{name:>10}: " + ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """Every figure of the run, for ``--json``."""
        return {
            "operations": {op: ({"fixes": self.counts[op]} if op == "reconcile fixes"
                                else dict(zip(("succeeded", "attempted"),
                                              self.ratio(op))))
                           for op in OPERATIONS},
            "counts": dict(sorted(self.counts.items())),
            "invariant_violations": self.violation_count,
            "violations": list(self.violations),
            "checks": dict(self.checks),
            "seconds": round(self.seconds, 3),
            "timeline": list(self.timeline),
        }


T = TypeVar("T", bound=Hashable)


class IndexedSet(Generic[T]):
    """A set with O(1) add, discard and uniform random choice; the choice
    depends only on the order of the operations (seeded runs repeat)."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self.where: dict[T, int] = {}

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, item: object) -> bool:
        return item in self.where

    def add(self, item: T) -> None:
        if item not in self.where:
            self.where[item] = len(self.items)
            self.items.append(item)

    def discard(self, item: T) -> None:
        i = self.where.pop(item, None)
        if i is None:
            return
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.where[last] = i

    def choice(self, rng: random.Random) -> T:
        return self.items[rng.randrange(len(self.items))]
