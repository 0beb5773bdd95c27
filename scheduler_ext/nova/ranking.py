"""nova's enabled host filters and weighers as a ``Ranking`` of our
candidates, for one select_destinations call.

Our source answers with at most ``[scheduler] max_placement_results``
candidates (or every one when nova asks placement without a limit); nova's
filters drop hosts, nova's weighers order the rest (with
``host_subset_size`` and ``shuffle_best_same_weighed_hosts``); a
candidate's weight becomes its rank in nova's order.
"""

from __future__ import annotations

import collections
import copy
import datetime
import itertools
import operator
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import nova.conf
import numpy as np
from nova.scheduler import filters as nova_filters

from oslo_log import log as logging

from scheduler_ext.nova.column_ranking import ColumnRanking, NotOnColumns
from scheduler_ext.nova.host_state_view import MirroredHostManager
from scheduler_ext.nova.request import allocation_request
from scheduler_ext.nova.vector_weighing import VectorWeighing
from scheduler_ext.sources.base import Candidate, Weights, roots_of

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

_uuid_of = operator.attrgetter("uuid")

#: The candidate limit when nova asks placement for every candidate (server
#: groups, a host targeted without its node).
UNLIMITED = 10 ** 9

#: On columns, how many best hosts are placed in nova's order before a
#: call reads them (at least ``host_subset_size``): a decision reads its
#: claim attempts and alternates; reading further places every host.
HEAD_HOSTS = 64


class AllocationRequest(dict):
    """One candidate's allocation request as nova's filters read it: a
    plain dict, equal to ``request.allocation_request(candidate)``, that
    also knows the candidate's ``position`` in the sequence ``rank`` was
    given. A copy is a plain dict."""

    __slots__ = ("position",)
    position: int

    def __copy__(self) -> dict:
        return dict(self)

    def __deepcopy__(self, memo: dict) -> dict:
        return copy.deepcopy(dict(self), memo)


class HostCandidates(Sequence):
    """One host's candidates in ``HostState.allocation_candidates``: the
    ``positions`` of its candidates in ``cands``, read as their
    ``AllocationRequest``, built on first read.

    nova's filters read allocation requests only for a request with a NUMA
    topology or PCI devices (``CandidateFilterMixin``, which then sets the
    ones it keeps as a plain list); building them all up front cost 3 to 8
    ms a decision at 1,000 hosts, garbage collections included (one
    placeholder per candidate besides a list per host cost about 0.2 ms
    more in a synthetic copy). Read-only: a filter replaces the sequence,
    as nova's own do."""

    __slots__ = ("cands", "positions", "_built")

    def __init__(self, cands: Sequence[Candidate], positions: tuple[int, ...]):
        self.cands = cands
        self.positions = positions
        self._built: list[AllocationRequest] | None = None

    def _requests(self) -> list[AllocationRequest]:
        if self._built is None:
            self._built = []
            for i in self.positions:
                ar = AllocationRequest(allocation_request(self.cands[i]))
                ar.position = i
                self._built.append(ar)
        return self._built

    def __getitem__(self, k):
        return self._requests()[k]

    def __iter__(self) -> Iterator[AllocationRequest]:
        return iter(self._requests())

    def __len__(self) -> int:
        return len(self.positions)

    def __repr__(self) -> str:
        return repr(self._requests())

    def __copy__(self) -> list:
        return list(self._requests())

    def __deepcopy__(self, memo: dict) -> list:
        return copy.deepcopy(list(self._requests()), memo)


def candidate_positions(roots: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """Per root, in first-seen order: the positions of its candidates in
    ``roots``. Most hosts have one candidate; a move adds its source's
    twice (on the view with and without its old allocations).

    Built by loops that run in C (``dict``, ``zip``, ``Counter``): in a
    scheduler's heap a Python loop over 1,000 hosts that makes an object
    each cost 0.8 to 1.1 ms (end-to-end benchmark, 9,900 hosts)."""
    roots = roots if isinstance(roots, list) else list(roots)
    n = len(roots)
    where = dict(zip(roots, zip(range(n))))     # a root's last position
    if len(where) == n:
        return where
    counts = collections.Counter(roots)
    for root in itertools.compress(counts, map((1).__lt__, counts.values())):
        at = [roots.index(root)]
        while at[-1] != where[root][0]:
            at.append(roots.index(root, at[-1] + 1))
        where[root] = tuple(at)
    return where


def _kept(host) -> tuple[int, ...]:
    """The positions of ``host``'s candidates nova's filters kept: all we
    handed over unless a filter replaced its ``allocation_candidates``
    (NUMA, PCI), then those of ours it kept (anything else is not ours)."""
    kept = host.allocation_candidates
    if type(kept) is HostCandidates:
        return kept.positions
    return tuple(sorted(ar.position for ar in kept if type(ar) is AllocationRequest))


def reads_candidates(host_filter: Any) -> bool:
    """Whether ``host_filter`` may read ``HostState.allocation_candidates``:
    nova's own filters read them only through ``CandidateFilterMixin``
    (NUMA, PCI); a filter from elsewhere may read them any way."""
    return isinstance(host_filter, nova_filters.CandidateFilterMixin) or \
        not type(host_filter).__module__.startswith("nova.")


class NovaRanking:
    """State of one select_destinations call: the (filtered) spec, the
    instance index, and the HostStates read so far (they carry what the
    earlier instances of a multi-create consumed).

    With a mirrored host manager and ``on_columns``, a request whose
    filters and weighers all run on columns (``column_ranking``) is ranked
    there, over every host that fits; any other on host-state objects,
    over the source's best ``limit``."""

    def __init__(self, context, spec_obj, host_manager, limit: int | None,
                 arrived: datetime.datetime | None = None, on_columns: bool = True):
        self.context = context
        #: when the call arrived (UTC): host states refreshed since count
        self.arrived = arrived
        self.spec_obj = spec_obj
        self.host_manager = host_manager
        #: the call's ranking on columns, or None: on objects
        self.columns = ColumnRanking.planned(host_manager, spec_obj) \
            if on_columns and isinstance(host_manager, MirroredHostManager) else None
        self.limit: int = UNLIMITED if self.columns is not None else limit or UNLIMITED
        #: on columns: root -> the host state handed out (``state``; a
        #: claim consumes it)
        self._copies: dict[str, Any] = {}
        #: which instance of a multi-create is being placed
        self.index = 0
        #: every HostState read in this call (``states`` maps them by uuid)
        self._hosts: list = []
        self._states: dict[str, Any] | None = None
        #: the hosts of the last ``rank``'s order and their uuids (``state``)
        self._ranked: tuple[list, list[str]] = ([], [])
        #: whether the host states get our candidates (``reads_candidates``):
        #: handing them over costs a new object on each of up to 1,000
        #: states, and nova's default filters read none
        self.hand_over = any(map(reads_candidates, host_manager.enabled_filters))
        #: nova's weighers (the host manager's, in its order) on arrays
        self.weighing = VectorWeighing(host_manager.weighers)

    @property
    def orders_all(self) -> bool:
        """On columns every host that fits is weighed and ordered here."""
        return self.columns is not None

    @property
    def states(self) -> dict[str, Any]:
        """uuid -> HostState of every host read in this call (made when
        first asked for: by a multi-create's later instances)."""
        if self._states is None:
            self._states = dict(zip(map(_uuid_of, self._hosts), self._hosts))
        return self._states

    def state(self, root: str) -> Any | None:
        """The HostState of ``root`` read in this call, or None. The host
        claimed and its alternates are in the last ``rank``'s order: a scan
        of its uuids costs less than mapping all 1,000 states. On columns,
        a copy of its built state, made at the first ask."""
        if self.columns is not None:
            return self._copy(root)
        if self._states is None:
            hosts, uuids = self._ranked
            try:
                return hosts[uuids.index(root)]
            except ValueError:
                pass
        return self.states.get(root)

    def host_states(self, cands: Sequence[Candidate],
                    where: dict[str, tuple[int, ...]]) -> list:
        """nova's HostStates of the roots ``where`` names (read once per
        call), in nova's order for the call's first instance (as stock nova
        hands them to its filters), in ``where``'s order after. Each is
        given its candidates (``where[root]``, positions in ``cands``) as
        ``allocation_candidates`` when a filter reads them (``hand_over``);
        otherwise no state is touched here."""
        if not self._hosts:
            hosts = self._read_states(list(where))
            self._hosts = hosts
        else:   # a later instance of a multi-create: most were read already
            states = self.states
            missing = [r for r in where if r not in states]
            for state in (self._read_states(missing) if missing else ()):
                states[state.uuid] = state
                self._hosts.append(state)
            hosts = [states[r] for r in where if r in states]
        if self.hand_over:
            for state in hosts:
                state.allocation_candidates = HostCandidates(cands, where[state.uuid])
        return hosts

    def _read_states(self, uuids: list[str]) -> list:
        """The host manager's host states of ``uuids``; a mirror's cells
        refreshed since the call arrived (its early read) are not read
        again."""
        if isinstance(self.host_manager, MirroredHostManager):
            return list(self.host_manager.get_host_states_by_uuids(
                self.context, uuids, self.spec_obj, since=self.arrived))
        return list(self.host_manager.get_host_states_by_uuids(
            self.context, uuids, self.spec_obj))

    def _copy(self, root: str) -> Any | None:
        state = self._copies.get(root)
        if state is None:
            columns = self.host_manager.view.columns
            row = columns.row_by_uuid.get(root)
            if row is None:
                return None
            state = self._copies[root] = self.host_manager.request_state(
                self.context, columns.states[row])
        return state

    def rank(self, cands: Sequence[Candidate]) -> Weights:
        """Per candidate: its weight in nova's order (``rank_on_objects``),
        on columns when the call can be."""
        if self.columns is not None:
            try:
                return self.rank_on_columns(cands)
            except NotOnColumns as exc:
                LOG.info("ranking on host-state objects: %s", exc)
                self.columns = None
                self._hosts = list(self._copies.values())
        return self.rank_on_objects(cands)

    def rank_on_columns(self, cands: Sequence[Candidate]) -> Weights:
        """``rank_on_objects`` on the columns (raises NotOnColumns)."""
        assert self.columns is not None
        cells = self.host_manager.cells_for(self.spec_obj)
        rows = self.columns.candidate_rows(self.context, cands, cells, self.arrived)
        row_by_uuid = self.host_manager.view.columns.row_by_uuid
        consumed = {row_by_uuid[root]: state for root, state in self._copies.items()}
        hosts = self.columns.hosts(self.context, rows, cells, consumed, self.arrived)
        passed = self.columns.filtered(hosts, self.index)
        totals = self.columns.weights(passed)
        head = max(HEAD_HOSTS, CONF.filter_scheduler.host_subset_size)
        if len(passed) <= 2 * head or np.isnan(totals).any():
            first = self.columns.best_first(passed, totals)     # every host placed
        else:
            first = self.columns.head_first(passed, totals, head).tolist()
        return ColumnWeights(NovaPlaces(self.columns, passed, totals,
                                        _tried_first(first, totals)), rows)

    def rank_on_objects(self, cands: Sequence[Candidate]) -> Weights:
        """Per candidate: its weight in nova's order (higher is better), or
        None when nova's host filters drop its host; ``best_first`` lists
        the candidates kept in nova's order (a host's in position order).

        Each host is mapped back to its candidates by its uuid, read after
        nova's filters and weighers: at 1,000 hosts a pass over nova's
        objects costs about a millisecond in cache misses more than in
        Python, and nova's weighers have just touched them."""
        where = candidate_positions(roots_of(cands))
        order = self._nova_order(self.host_states(cands, where))
        uuids = list(map(_uuid_of, order))
        self._ranked = (order, uuids)
        out: list[float | None] = [None] * len(cands)
        best_first: list[int] = []
        kept = best_first.append
        weight = float(len(order))
        for positions in (map(_kept, order) if self.hand_over
                          else map(where.__getitem__, uuids)):
            for i in positions:
                out[i] = weight
                kept(i)
            weight -= 1.0
        return Weights(out, best_first)

    def _nova_order(self, hosts: list) -> list:
        """The hosts nova's filters keep, in the order nova would try them
        (nova's weighing by ``VectorWeighing``: nova's weights and order).
        As in nova, a host whose candidates a filter removed (NUMA, PCI)
        is weighed with the others; ``rank`` skips it as nova's claim
        loop does."""
        passed = self.host_manager.get_filtered_hosts(hosts, self.spec_obj,
                                                      self.index)
        if not passed:
            return []
        weighed = self.weighing.weighed_hosts(passed, self.spec_obj)
        order = _tried_first(list(range(len(weighed))), [w.weight for w in weighed])
        return [weighed[k].obj for k in order]


class NovaPlaces:
    """The hosts a column ranking kept, by place in the order nova tries
    them: ``first`` (positions in ``hosts``: the hosts weighing at least
    the ``HEAD_HOSTS``-th, or every host, in the order ``_tried_first``
    gave) then the others by weight, ties in nova's order. A place past ``first`` is
    found when asked for; the whole order is made only when read past
    ``first``."""

    def __init__(self, ranking: ColumnRanking, hosts, totals: np.ndarray, first: list[int]):
        self.ranking = ranking
        self.hosts = hosts
        self.totals = totals
        self.first = first
        size = hosts.columns.size
        #: per row (-1: the last, none), its position in ``hosts`` or -1
        self.position_of_row = np.full(size + 1, -1)
        self.position_of_row[hosts.rows] = np.arange(len(hosts))
        #: per row, its place, or -1 (not kept, or not placed yet)
        self.place_of_row = np.full(size + 1, -1)
        self.place_of_row[hosts.rows[first]] = np.arange(len(first))
        self.whole = False

    def __len__(self) -> int:
        return len(self.hosts)

    def place(self, row: int) -> int | None:
        """The place of the host of ``row``, None when it is not kept."""
        place = int(self.place_of_row[row])
        if place >= 0 or self.whole:
            return place if place >= 0 else None
        at = int(self.position_of_row[row])
        return None if at < 0 else self.ranking.place(self.hosts, self.totals, at)

    def make_whole(self) -> None:
        """Place every host (``first`` as it is, the others after it)."""
        if self.whole:
            return
        order = np.asarray(self.ranking.best_first(self.hosts, self.totals))
        order[:len(self.first)] = self.first
        self.place_of_row[self.hosts.rows[order]] = np.arange(len(order))
        self.whole = True


class ColumnWeights(Weights):
    """``rank_on_columns``' weights: per candidate (its host's row in
    ``rows``, -1 for none), the weight of its host's place in ``places``
    (the n hosts kept weigh n down to 1), or None. ``best_first`` is
    read from the first hosts' places until a position past them is
    asked for."""

    def __init__(self, places: NovaPlaces, rows: np.ndarray):
        self.places = places
        self.rows = rows
        self._order: np.ndarray | None = None
        at = places.place_of_row[rows]
        first = np.flatnonzero(at >= 0)
        self._best_first = _PlacedOrder(
            first[np.argsort(at[first], kind="stable")].tolist(),
            int(np.count_nonzero(places.position_of_row[rows] >= 0)), self.order)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(len(self))[i]]
        place = self.places.place(int(self.rows[i]))
        return None if place is None else float(len(self.places) - place)

    def first(self, n: int) -> Weights:
        return ColumnWeights(self.places, self.rows[:n])

    def order(self) -> np.ndarray:
        """Every kept candidate, best first (the whole order made)."""
        if self._order is None:
            self.places.make_whole()
            at = self.places.place_of_row[self.rows]
            kept = np.flatnonzero(at >= 0)
            # a stable sort keeps a host's candidates in position order
            self._order = kept[np.argsort(at[kept], kind="stable")]
        return self._order


class _PlacedOrder(Sequence):
    """``ColumnWeights.best_first``: ``first`` (the candidates of the
    first hosts, by place then position), then the rest of the ``length``
    read from ``whole()`` (every one, in order) when asked for."""

    def __init__(self, first: list[int], length: int, whole: Callable[[], np.ndarray]):
        self.first = first
        self.length = length
        self.whole = whole

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[j] for j in range(len(self))[k]]
        if not -self.length <= k < self.length:
            raise IndexError(k)     # iteration ends here, without the whole order
        k %= self.length
        if k < len(self.first):
            return self.first[k]
        return int(self.whole()[k])


def _tried_first(best_first: list[int], weights: Sequence[float] | np.ndarray) -> list[int]:
    """``best_first`` (indexes into ``weights``, by weight, highest first)
    in the order nova tries them: the hosts of the best weight shuffled
    when ``shuffle_best_same_weighed_hosts``, then one of the first
    ``host_subset_size`` drawn at random to go first."""
    if not best_first:
        return best_first
    if CONF.filter_scheduler.shuffle_best_same_weighed_hosts:
        top = weights[best_first[0]]
        best = list(itertools.takewhile(lambda k: weights[k] == top, best_first))
        random.shuffle(best)
        best_first = best + best_first[len(best):]
    subset = best_first[:max(1, CONF.filter_scheduler.host_subset_size)]
    first = random.choice(subset)
    best_first.remove(first)
    best_first.insert(0, first)
    return best_first
