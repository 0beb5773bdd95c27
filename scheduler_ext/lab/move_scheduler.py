"""The scheduler processes of a move flow (``move_run``): one after
another, each able to die at one of its writes, with the rankings a flow
gives them (nova's weighers putting the source last; the other run's
choices to follow).

The death is modelled at the client (``DyingClient``; the reconcile
process's death at its writes is modelled the same way, ``move_reconcile``): at the kill point
the write is dropped (``before_*``) or made (``after_*``), and from then on
every call of the dead process fails without reaching placement; the
conductor's call fails (``SchedulerUnreachable``) and a new scheduler is
built, with whatever its start-up runs (``Scheduler._start``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, cast

from scheduler_ext import driver as se_driver
from scheduler_ext.lab.nova_model import SchedulerUnreachable
from scheduler_ext.placement import PlacementClient, allocations
from scheduler_ext.sources.changes import FeedChanges
from scheduler_ext.sources.fleet_view import FleetView

STOCK, OURS = "stock", "same_host"


class SchedulerDied(BaseException):
    """The process (the scheduler, or ours' reconcile: ``move_reconcile``)
    is gone: nothing it does reaches placement. A BaseException so that no
    handler of the dead process 'survives'."""


class DyingClient:
    """The placement client of a process which dies at ``kill``: at the
    ``at``-th write of the kill point's kind (``write_kind``: the
    scheduler's claim by default) the write is dropped (``before_*``) or
    made (``after_*``), then every call raises SchedulerDied."""

    def __init__(self, client: PlacementClient, kill: str,
                 write_kind: Callable[[str, Sequence[Any]], str] | None = None,
                 at: int = 1):
        self._client, self.kill, self.dead, self.reached = client, kill, False, ""
        self._kind = write_kind or _write_kind
        self.at = at
        #: writes of the kill point's kind seen so far (the dying one included)
        self.writes = 0
        #: the kill point is live (for the scheduler: during the move's
        #: scheduling call only)
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*a: Any, **kw: Any) -> Any:
            if self.dead:
                raise SchedulerDied(name)
            kind = self._kind(name, a) if self.armed else ""
            if kind and self.kill.endswith("_" + kind):
                self.writes += 1
                kind = kind if self.writes == self.at else ""
            if kind and self.kill == f"before_{kind}":
                self._die(kind)
            result = attr(*a, **kw)
            if kind and self.kill == f"after_{kind}":
                self._die(kind)
            return result
        return call

    def _die(self, kind: str) -> None:
        self.dead, self.reached = True, self.kill
        raise SchedulerDied(kind)


def _write_kind(method: str, args: Sequence[Any]) -> str:
    """``claim`` (a write giving an instance allocations: ours' one write
    during a move) or "" (not a write, or another write)."""
    if method == "post_allocations":
        writes = args[0]
    elif method == "put_allocations":
        writes = {args[0]: args[1]}
    else:
        return ""
    if any(w.allocations and w.consumer_type == "INSTANCE" for w in writes.values()):
        return "claim"
    return ""


class Follow:
    """A ranking that prefers, in order, the hosts (and, on a host, the
    very allocations) another run chose for the same call: stock follows
    ours' choices, so the two end states differ only by how each strategy
    writes a choice, not by which host it weighs best. A candidate the
    call's own ranking (``drop``: nova's ``ignore_hosts``) drops stays
    dropped."""

    limit = 1000

    orders_all = False

    def __init__(self, picks: Sequence[Any], drop: Any = None):
        self.picks = [(p.root, allocations.copy(p.allocations)) for p in picks]
        self.drop = drop

    def rank(self, cands: Sequence[Any]) -> list[float | None]:
        out: list[float | None] = []
        kept = self.drop.rank(cands) if self.drop is not None else [0.0] * len(cands)
        for c, keep in zip(cands, kept):
            if keep is None:
                out.append(None)
                continue
            score = 0.0
            for j, (root, allocs) in enumerate(self.picks):
                if c.root == root:
                    score = max(score, 2.0 * (len(self.picks) - j) +
                                (allocations.copy(c.allocations) == allocs))
            out.append(score)
        return out


class Scheduler:
    """One scheduler process after another: ``select`` asks the current
    one; when it dies, a new one is built and the conductor's call fails
    with SchedulerUnreachable. ``decisions`` records each call's
    selections (None: no answer); with ``follow`` (another run's
    decisions) each call ranks by them (``Follow``)."""

    def __init__(self, client: PlacementClient, strategy: str, engine: str,
                 kill: str, follow: Sequence[Any] | None = None):
        self.decisions: list[Any] = []
        self.follow = follow
        #: the ranking of the move's call (nova's weighers), if any
        self.move_ranking: Any = None
        self.client = client
        self.conf = se_driver.make_conf(move_strategy=strategy, engine=engine)
        self.dying = DyingClient(client, kill)
        self.driver = self._start(cast(PlacementClient, self.dying))
        self.restarts = 0

    def _start(self, client: PlacementClient) -> se_driver.SchedulerDriver:
        """A new scheduler process: the driver as the service builds it."""
        return se_driver.SchedulerDriver(client, self.conf)

    def select(self, request: Any, ranking: Any = None) -> Any:
        view = self.driver.upkeep
        if isinstance(view, FleetView) and not isinstance(view.source, FeedChanges):
            # a real placement hides decreases from the view's poll; the
            # two runs are compared decision for decision
            view.reread()
        call = len(self.decisions)
        self.decisions.append(None)
        if self.follow is not None and call < len(self.follow) and self.follow[call]:
            ranking = Follow(self.follow[call], ranking)
        elif ranking is None and request.move is not None:
            ranking = self.move_ranking
        try:
            result = self.driver.select_destinations(request, ranking=ranking)
        except SchedulerDied as died:
            self.restarts += 1
            self.driver = self._start(self.client)
            raise SchedulerUnreachable(f"scheduler died at {died}") from None
        self.decisions[call] = result[0]
        return result


class SourceLast:
    """nova's weighers preferring any other host to the source."""

    limit = 1000

    orders_all = False

    def __init__(self, source: str):
        self.source = source

    def rank(self, cands: Sequence[Any]) -> list[float | None]:
        return [0.0 if c.root == self.source else 1.0 for c in cands]
