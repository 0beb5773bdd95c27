"""The reconcile passes of a move flow (``move_run``), in one process
that can die at one of its placement writes, and the restarted service's
pass after it.

The writes are numbered over the flow's passes in order (ours' pass
during VERIFY_RESIZE, then the final one), from 1. At the kill point
(``before_reconcile_write`` or ``after_reconcile_write``) the process dies
right before or right after its ``at``-th write (``DyingClient``); the
final pass, when it writes less, dies at its last write, so that a flow
whose reconcile writes at all reaches its kill point. The restarted
service then runs the interrupted pass once more with a fresh
``Reconciler`` (its tracker starts empty and looks back over every recent
change, so every instance of the pass is worked on again).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence, cast

from scheduler_ext.lab.move_scheduler import DyingClient, SchedulerDied
from scheduler_ext.moves.reconcile import InstanceState, Reconciler
from scheduler_ext.placement import PlacementClient

#: the reconcile process dies right before / right after one of its writes
KILL_POINTS = ("before_reconcile_write", "after_reconcile_write")
_WRITES = ("post_allocations", "put_allocations", "delete_allocations")


def _reconcile_write(method: str, args: Sequence[Any]) -> str:
    """``reconcile_write`` for any placement write of the reconcile."""
    return "reconcile_write" if method in _WRITES else ""


class ReconcileService:
    """The reconcile passes of one run. ``kill`` (one of KILL_POINTS, or
    anything else for none) and ``at`` (the write, numbered over the
    passes); ``restart`` False leaves out the restarted service's pass (a
    test showing that pass is what ends where stock ends)."""

    def __init__(self, client: PlacementClient, kill: str, at: int,
                 restart: bool = True):
        self.client, self.at, self.restart = client, at, restart
        self.kill = kill if kill in KILL_POINTS else ""
        #: the writes made (or attempted, by the dying one) so far
        self.writes = 0
        #: the kill point reached ("" not yet)
        self.reached = ""

    def run(self, states: Iterable[InstanceState], last: bool = False) -> None:
        """One pass over ``states`` (``last``: the flow's final pass)."""
        states = list(states)
        if not self.kill or self.reached:
            Reconciler(self.client).run(states, apply=True)
            return
        at = self.at - self.writes
        if last:
            planned = sum(1 for fix in Reconciler(self.client).run(states)
                          if fix.writes)
            at = min(at, planned) if planned else at
        dying = DyingClient(self.client, self.kill, _reconcile_write, at)
        dying.armed = True
        try:
            Reconciler(cast(PlacementClient, dying)).run(states, apply=True)
        except SchedulerDied:
            self.reached = self.kill
            if self.restart:
                Reconciler(self.client).run(states, apply=True)
        finally:
            self.writes += dying.writes
