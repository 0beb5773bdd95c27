"""The embedded placement's allocation ledger: usage per (provider, class)
and, per provider, the consumers holding allocations there, both kept equal
to the consumers' allocations, with every change written to a change log.
"""

from __future__ import annotations

from typing import Iterator

from scheduler_ext.placement.change_log import ChangeLog
from scheduler_ext.placement.model import Allocations


class AllocationLedger:
    """Usage and holders; not thread-safe (the placement locks)."""

    def __init__(self, changes: ChangeLog):
        self.changes = changes
        #: (rp, rc) -> used units; absent means 0
        self.usage: dict[tuple[str, str], int] = {}
        # rp -> consumers holding allocations there, in the order they came
        self._holders: dict[str, dict[str, None]] = {}

    def used(self, rp: str, rc: str) -> int:
        return self.usage.get((rp, rc), 0)

    def holders(self, rp: str) -> Iterator[str]:
        """The consumers holding allocations on ``rp``."""
        return iter(tuple(self._holders.get(rp, ())))

    def in_use(self, rp: str) -> bool:
        return bool(self._holders.get(rp))

    def forget_provider(self, rp: str) -> None:
        """``rp`` was deleted (it held nothing)."""
        self._holders.pop(rp, None)
        self.changes.provider(rp)

    def apply(self, consumer: str, allocs: Allocations,
              sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) ``consumer``'s allocations; log
        the consumer and every provider named."""
        if allocs:
            self.changes.consumer(consumer)
        usage = self.usage
        for rp, res in allocs.items():
            holders = self._holders.setdefault(rp, {})
            if sign > 0:
                holders[consumer] = None
            else:
                holders.pop(consumer, None)
            self.changes.provider(rp)
            for rc, n in res.items():
                value = usage.get((rp, rc), 0) + sign * n
                if value:
                    usage[(rp, rc)] = value
                else:
                    usage.pop((rp, rc), None)
