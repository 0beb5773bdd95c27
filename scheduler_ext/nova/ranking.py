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
import random
from collections.abc import Iterator, Sequence
from typing import Any

import nova.conf

from scheduler_ext.nova.request import allocation_request
from scheduler_ext.sources.base import Candidate

CONF = nova.conf.CONF

#: The candidate limit when nova asks placement for every candidate (server
#: groups, a host targeted without its node).
UNLIMITED = 10 ** 9


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


def host_candidates(cands: Sequence[Candidate], roots: Sequence[str]
                    ) -> dict[str, HostCandidates]:
    """Per root, in first-seen order: its candidates of ``cands`` (whose
    roots are ``roots``). Most hosts have one candidate; a move adds its
    source's twice (on the view with and without its old allocations)."""
    groups = {root: HostCandidates(cands, (i,)) for i, root in enumerate(roots)}
    if len(groups) == len(roots):
        return groups
    several = {root for root, n in collections.Counter(roots).items() if n > 1}
    positions: dict[str, list[int]] = {root: [] for root in several}
    for i, root in enumerate(roots):
        if root in several:
            positions[root].append(i)
    for root, where in positions.items():
        groups[root] = HostCandidates(cands, tuple(where))
    return groups


class NovaRanking:
    """State of one select_destinations call: the (filtered) spec, the
    instance index, and the HostStates read so far (they carry what the
    earlier instances of a multi-create consumed)."""

    def __init__(self, context, spec_obj, host_manager, limit: int | None):
        self.context = context
        self.spec_obj = spec_obj
        self.host_manager = host_manager
        self.limit: int = limit or UNLIMITED
        #: which instance of a multi-create is being placed
        self.index = 0
        self.states: dict[str, Any] = {}

    def host_states(self, groups: dict[str, HostCandidates]) -> list:
        """nova's HostStates of the roots ``groups`` names (read once per
        call), each given its group as ``allocation_candidates``; in
        nova's order for the call's first instance (as stock nova hands
        them to its filters), in ``groups``' order after. Each state is
        touched once: at 1,000 hosts every pass over nova's objects costs
        about a millisecond."""
        states = self.states
        if not states:
            hosts = []
            for state in self.host_manager.get_host_states_by_uuids(
                    self.context, list(groups), self.spec_obj):
                uuid = state.uuid
                states[uuid] = state
                state.allocation_candidates = groups[uuid]
                hosts.append(state)
            return hosts
        # a later instance of a multi-create: most were read already
        missing = [r for r in groups if r not in states]
        for state in self.host_manager.get_host_states_by_uuids(
                self.context, missing, self.spec_obj) if missing else ():
            states[state.uuid] = state
        hosts = []
        for root, group in groups.items():
            state = states.get(root)
            if state is not None:
                state.allocation_candidates = group
                hosts.append(state)
        return hosts

    def rank(self, cands: Sequence[Candidate]) -> list[float | None]:
        """Per candidate: its weight in nova's order (higher is better), or
        None when nova's host filters drop its host."""
        roots = getattr(cands, "roots", None)     # no candidate made
        if roots is None:
            roots = [c.root for c in cands]
        order = self._nova_order(self.host_states(host_candidates(cands, roots)))
        out: list[float | None] = [None] * len(cands)
        weight = float(len(order))
        for host in order:
            group = host.allocation_candidates
            if type(group) is HostCandidates:   # no filter took any away
                for i in group.positions:
                    out[i] = weight
            else:   # a filter kept some of ours (anything else is not ours)
                for ar in group:
                    if type(ar) is AllocationRequest:
                        out[ar.position] = weight
            weight -= 1.0
        return out

    def _nova_order(self, hosts: list) -> list:
        """The hosts nova's filters keep, in the order nova would try them.
        As in nova, a host whose candidates a filter removed (NUMA, PCI)
        is weighed with the others; ``rank`` skips it as nova's claim
        loop does."""
        passed = self.host_manager.get_filtered_hosts(hosts, self.spec_obj,
                                                      self.index)
        if not passed:
            return []
        weighed = self.host_manager.get_weighed_hosts(passed, self.spec_obj)
        if CONF.filter_scheduler.shuffle_best_same_weighed_hosts:
            best = [w for w in weighed if w.weight == weighed[0].weight]
            random.shuffle(best)
            weighed = best + list(weighed[len(best):])
        order = [w.obj for w in weighed]
        subset = order[:max(1, CONF.filter_scheduler.host_subset_size)]
        first = random.choice(subset)
        order.remove(first)
        order.insert(0, first)
        return order
