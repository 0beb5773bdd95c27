"""The candidate-source contract: where a move strategy gets its hosts.

A ``CandidateSource`` answers "which hosts fit this query, best first", for
a boot (``candidates``) and for a move (``move_candidates``: the source
host with the moving server's old allocations treated as free, every
other host's providers chosen with them held). Keeping what it answers from up to date is another
object's job, its ``FleetUpkeep``; a ``SourcePlugin`` builds the two. A ``Ranking`` re-orders, and may drop, candidates for
one call (nova's host filters and weighers, for instance); it is passed
per call, never stored in a source.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from typing import TYPE_CHECKING, Iterable, Mapping, Protocol, Sequence

import numpy as np
from oslo_config import cfg

from scheduler_ext.engine.weigh import DEFAULT_WEIGHING, Weighing
from scheduler_ext.placement.client import PlacementClient
from scheduler_ext.placement.model import Allocations, ConsumerAllocations
from scheduler_ext.placement.query import CandidateRequest


@dataclasses.dataclass(slots=True)
class Candidate:
    """One way to place the request: the root (compute node) provider, the
    amounts per provider (sharing providers included), its weight (higher
    is better) and which providers serve each request group (placement's
    ``mappings``: suffix -> provider uuids; None: not known). A strategy
    answers with Candidates too: per instance the claimed one, then the
    alternates (nova's adapter turns them into nova's ``Selection``).

    Never changed once built (a new weight is a new Candidate); not frozen
    because a source builds a thousand per decision and a frozen
    dataclass costs four times as much to build."""

    root: str
    allocations: Allocations
    weight: float = 0.0
    mappings: Mapping[str, Sequence[str]] | None = None

    def with_weight(self, weight: float) -> "Candidate":
        """This candidate with ``weight`` (a direct build:
        ``dataclasses.replace`` costs several times more, once per
        candidate of every decision)."""
        return Candidate(self.root, self.allocations, weight, self.mappings)


@dataclasses.dataclass(frozen=True)
class MoveCandidates:
    """The candidates of a move: the source with the old allocations
    released, the other hosts' providers chosen with them held.

    ``same_host``: the source host, with the old allocations released (its
    real free space), or None if it does not fit even then. ``others``:
    other hosts that fit with the old allocations still held (they stay
    held while the move runs), best first. ``held_source``: the source host
    if the new flavor fits beside the old one (what nova's conductor can
    claim on a reschedule), else None. ``beside_old``: the source can only
    be taken as nova takes it, the new flavor beside the old
    (``held_source``): the old allocations or ``same_host`` use a device
    the two flavors never share (``engine.pinned.whole_devices``; see
    ``moves.strategy``).
    """

    same_host: Candidate | None
    others: Sequence[Candidate]
    held_source: Candidate | None
    beside_old: bool = False


class CandidateSource(Protocol):
    """Where candidates come from (the numpy engine, or placement): it
    answers, and keeps nothing up to date (its ``FleetUpkeep`` does)."""

    def candidates(self, query: CandidateRequest, *, limit: int,
                   ordered: bool = True) -> Sequence[Candidate]:
        """The best ``limit`` candidates for a boot, best first (in any
        order when not ``ordered`` and every candidate is within
        ``limit``)."""

    def move_candidates(self, query: CandidateRequest, *, limit: int,
                        source: str, released: Allocations | None,
                        ordered: bool = True) -> MoveCandidates:
        """Candidates of a move from ``source``; ``released`` (the old
        allocations) are treated as free for the source host only;
        ``ordered`` as for ``candidates``."""


class FleetUpkeep(Protocol):
    """The upkeep of what a source answers from: the engine's cached view
    of placement (``fleet_view.FleetView``), or nothing when the source
    asks placement itself (``placement.PlacementUpkeep``). The driver and
    the strategy tell it of decisions and writes; sources never do."""

    def refresh(self) -> None:
        """Bring any cached view up to date before a decision."""

    def after_decision(self) -> None:
        """A decision has been answered: start background upkeep that is
        due (never waits for it)."""

    def changed(self, providers: Iterable[str]) -> None:
        """The allocations on these providers were (maybe) written."""

    def wrote(self, before: Allocations, after: Allocations) -> None:
        """Our own allocation write, accepted by placement, took the
        consumers it wrote from holding ``before`` to holding ``after``
        (each summed over those consumers, per provider and class)."""

    def recheck(self, query: CandidateRequest, limit: int,
                also: Iterable[str] = ()) -> bool:
        """No usable candidate was found: bring what may have freed room
        for ``query`` (and the providers ``also`` names) up to date. True
        when something was re-read and asking again may answer
        differently."""

    def consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        """What one consumer holds in placement, read now through the
        upkeep's own channel (``GET /allocations/{consumer}`` or its SQL
        equivalent)."""

    def root_of(self, allocs: Allocations) -> str | None:
        """The one root the non-sharing providers of ``allocs`` belong to
        in the cached view; None when no view is kept, a provider is
        unknown to it, or there is not exactly one."""


class SourcePlugin(Protocol):
    """What a ``scheduler_ext.engine`` plugin is (the class stevedore
    loads by the ``[scheduler_ext] engine`` name): ``build`` makes the
    upkeep object and the source that answers from what it keeps."""

    def build(self, client: PlacementClient, conf: cfg.ConfigOpts,
              weighing: Weighing = DEFAULT_WEIGHING
              ) -> tuple[FleetUpkeep, CandidateSource]:
        """(upkeep, source) over ``client``, hosts ordered by
        ``weighing``."""


class Ranking(Protocol):
    """One call's outer ranking of candidates (nova's host filters and
    weighers over our candidates, for instance)."""

    #: How many candidates to ask the source for before ranking.
    limit: int
    @property
    def orders_all(self) -> bool:
        """Whether the ranking orders every candidate it is given by
        itself: the source need not sort them when none is cut by
        ``limit``."""

    def rank(self, cands: Sequence[Candidate]) -> Sequence[float | None]:
        """Per candidate, in order: its weight (higher is better), or None
        when the ranking drops it (a ``Weights`` when the ranking knows its
        order already)."""


class Weights(Sequence[float | None]):
    """A ranking's weights per candidate (None: dropped) that also carry
    ``best_first``: the positions of the candidates kept, by weight
    (higher first), equal weights in position order; ``RankedCandidates``
    then need not sort them. A subclass may make both when read."""

    def __init__(self, values: Sequence[float | None], best_first: Sequence[int]):
        self._values = values
        self._best_first = best_first

    @property
    def best_first(self) -> Sequence[int]:
        return self._best_first

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, i):
        return self._values[i]

    def first(self, n: int) -> "Weights":
        """The weights of candidates ``0 .. n-1`` alone (``best_first``
        without the others)."""
        return Weights(self._values[:n], [k for k in self.best_first if k < n])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Weights({list(self)!r})"


@dataclasses.dataclass(frozen=True)
class IndexRows:
    """Candidates' roots as rows of ``uuids``, a list that only grows:
    ``rows[k]`` is candidate k's, -1 where its root is not read from it
    (read that one's ``root``)."""

    uuids: Sequence[str]
    rows: np.ndarray


class LazyCandidates(Sequence[Candidate]):
    """Candidates made when read (a decision reads the few it claims and
    offers as alternates, out of up to 1,000): a subclass gives
    ``__len__`` and ``_item(k)`` for ``0 <= k < len``; indexing, slices
    and equality (item by item) are here. ``roots``, ``weight_at`` and
    ``expect`` read without making candidates where a subclass can (the
    defaults here make them)."""

    __slots__ = ()

    def _item(self, k: int) -> Candidate:
        raise NotImplementedError

    @property
    def roots(self) -> list[str]:
        """Each candidate's root, in order."""
        return [self._item(k).root for k in range(len(self))]

    def weight_at(self, k: int) -> float:
        """``self[k].weight`` (``0 <= k < len``)."""
        return self._item(k).weight

    def root_at(self, k: int) -> str:
        """``self[k].root`` (``0 <= k < len``)."""
        return self.roots[k]

    def expect(self, ks: Sequence[int]) -> None:
        """Candidates ``ks`` are read next: a subclass that builds them in
        batches builds these together. A hint only (by default ignored)."""

    def index_rows(self) -> IndexRows | None:
        """Each candidate's root as a row of a uuid list that only grows
        (the engine's index), when the candidates know it (None: they do
        not; see ``IndexRows``)."""
        return None

    def __getitem__(self, k):
        n = len(self)
        if isinstance(k, slice):
            return [self._item(i) for i in range(n)[k]]
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(k)
        return self._item(k)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


class RankedCandidates(LazyCandidates):
    """``cands`` that a ranking kept, best first (equal weights in their
    first order), each carrying its new weight when read. Reading one
    tells ``cands`` (its ``expect``, when it has one) which are read next,
    in this order."""

    __slots__ = ("_cands", "_weights", "_order", "_told")

    #: how many candidates ``expect`` names at a time
    AHEAD = 8

    def __init__(self, cands: Sequence[Candidate],
                 weights: Sequence[float | None]):
        self._cands = cands
        self._weights = weights
        best_first = weights.best_first if isinstance(weights, Weights) else None
        if best_first is None:
            # compress() and the sort's key loop in C: up to 1,000 a decision
            best_first = list(itertools.compress(
                range(len(weights)),
                map(operator.is_not, weights, itertools.repeat(None))))
            # a reversed sort keeps equal weights in their first order
            best_first.sort(key=weights.__getitem__, reverse=True)  # type: ignore[arg-type]
        self._order = best_first
        #: ``expect`` was last told of ``_order[_told:_told + AHEAD]``
        self._told = -self.AHEAD

    def __len__(self) -> int:
        return len(self._order)

    def weight_at(self, k: int) -> float:
        """``self[k].weight``, without making the candidate."""
        return self._weights[self._order[k]]  # type: ignore[return-value]

    def _item(self, k: int) -> Candidate:
        if not self._told <= k < self._told + self.AHEAD:
            if isinstance(self._cands, LazyCandidates):
                self._cands.expect(self._order[k:k + self.AHEAD])
            self._told = k
        i = self._order[k]
        return self._cands[i].with_weight(self._weights[i])  # type: ignore[arg-type]


def roots_of(cands: Sequence[Candidate]) -> list[str]:
    """Each candidate's root, in order (no candidate is made when
    ``cands`` is lazy and knows its roots; the list may be ``cands``' own:
    read it, never change it)."""
    if isinstance(cands, LazyCandidates):
        return cands.roots
    return [c.root for c in cands]


def ranked(cands: Sequence[Candidate], ranking: Ranking) -> Sequence[Candidate]:
    """The candidates ``ranking`` keeps, re-weighed and best first."""
    return RankedCandidates(cands, ranking.rank(cands))


class RankedSource:
    """``inner``'s candidates passed through ``ranking``: a view for one
    call (see ``Ranking``)."""

    def __init__(self, inner: CandidateSource, ranking: Ranking):
        self.inner = inner
        self.ranking = ranking

    def candidates(self, query: CandidateRequest, *, limit: int,
                   ordered: bool = True) -> Sequence[Candidate]:
        return ranked(self.inner.candidates(query, limit=self.ranking.limit,
                                            ordered=not self.ranking.orders_all),
                      self.ranking)

    def move_candidates(self, query: CandidateRequest, *, limit: int,
                        source: str, released: Allocations | None,
                        ordered: bool = True) -> MoveCandidates:
        view = self.inner.move_candidates(query, limit=self.ranking.limit,
                                          source=source, released=released,
                                          ordered=not self.ranking.orders_all)
        others = view.others
        extra = [view.same_host, view.held_source]
        n = len(others)
        weights = self.ranking.rank(
            Extended(others, [c for c in extra if c is not None]))
        tail = iter(weights[n:])
        same, held = (None if c is None else _reweighed(c, next(tail))
                      for c in extra)
        # the ranking's order, without the tail's
        head = weights.first(n) if isinstance(weights, Weights) else weights[:n]
        return MoveCandidates(same, RankedCandidates(others, head), held,
                              view.beside_old)


def _reweighed(cand: Candidate, weight: float | None) -> Candidate | None:
    return None if weight is None else cand.with_weight(weight)


class Extended(LazyCandidates):
    """``head`` then ``tail`` as one sequence, with the ``roots`` of both
    (``roots_of``: nothing is made when ``head`` is lazy)."""

    __slots__ = ("_head", "_tail", "_roots")

    def __init__(self, head: Sequence[Candidate], tail: Sequence[Candidate]):
        self._head, self._tail = head, tail
        self._roots: list[str] | None = None

    @property
    def roots(self) -> list[str]:
        if self._roots is None:
            self._roots = roots_of(self._head) + [c.root for c in self._tail]
        return self._roots

    def index_rows(self) -> IndexRows | None:
        head = self._head.index_rows() if isinstance(self._head, LazyCandidates) else None
        if head is None:
            return None
        return IndexRows(head.uuids, np.concatenate(
            [head.rows, np.full(len(self._tail), -1, dtype=np.int64)]))

    def __len__(self) -> int:
        return len(self._head) + len(self._tail)

    def root_at(self, k: int) -> str:
        n = len(self._head)
        if k >= n:
            return self._tail[k - n].root
        head = self._head
        return head.root_at(k) if isinstance(head, LazyCandidates) else head[k].root

    def _item(self, k: int) -> Candidate:
        n = len(self._head)
        return self._head[k] if k < n else self._tail[k - n]


class Inserted(LazyCandidates):
    """``best_first`` with ``cand`` placed by its weight: ahead of the
    candidates of equal weight when ``ahead``, after them otherwise, or at
    the very front when ``front``. Its place is searched as items are
    read, among the candidates up to the one read: reading the first few
    reads no weight further down ``best_first`` (whose far end a ranking
    may make only when read)."""

    __slots__ = ("_base", "_cand", "_ahead", "_lo", "_hi")

    def __init__(self, best_first: Sequence[Candidate], cand: Candidate, *,
                 ahead: bool = False, front: bool = False):
        self._base, self._cand, self._ahead = best_first, cand, ahead
        #: ``cand`` goes after ``best_first[:_lo]`` and before ``[_hi:]``
        #: (its place is known once they meet)
        self._lo, self._hi = 0, 0 if front else len(best_first)

    def _goes_after(self, k: int) -> bool:
        base = self._base
        w = base.weight_at(k) if isinstance(base, LazyCandidates) else base[k].weight
        return w > self._cand.weight or (w == self._cand.weight and not self._ahead)

    def _at(self, k: int) -> int | None:
        """``cand``'s place when it is at most ``k``, else None (reads
        weights up to ``k`` only)."""
        if self._lo < self._hi:
            if self._lo <= k < self._hi:
                if self._goes_after(k):
                    self._lo = k + 1
                    return None
                self._hi = k
            elif k < self._lo:
                return None
            lo, hi = self._lo, self._hi
            while lo < hi:      # the first place ``cand`` does not go after
                mid = (lo + hi) // 2
                if self._goes_after(mid):
                    lo = mid + 1
                else:
                    hi = mid
            self._lo = self._hi = lo
        return self._lo if self._lo <= k else None

    def __len__(self) -> int:
        return len(self._base) + 1

    def _item(self, k: int) -> Candidate:
        at = self._at(k)
        if at is None:
            return self._base[k]
        return self._cand if k == at else self._base[k - 1]


if TYPE_CHECKING:       # mypy checks the class against the declared contract
    _IS_A_SOURCE: type[CandidateSource] = RankedSource
