"""nova's enabled host filters and weighers as a ``Ranking`` of our
candidates, for one select_destinations call.

Our source answers with at most ``[scheduler] max_placement_results``
candidates (or every one when nova asks placement without a limit); nova's
filters drop hosts, nova's weighers order the rest (with
``host_subset_size`` and ``shuffle_best_same_weighed_hosts``); a
candidate's weight becomes its rank in nova's order.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator, Mapping
from typing import Any, Sequence

import nova.conf

from scheduler_ext.nova.request import allocation_request
from scheduler_ext.sources.base import Candidate

CONF = nova.conf.CONF

#: The candidate limit when nova asks placement for every candidate (server
#: groups, a host targeted without its node).
UNLIMITED = 10 ** 9


class LazyAllocationRequest(Mapping):
    """One candidate's allocation request in ``HostState.allocation_candidates``,
    built on first read.

    nova's filters read an allocation request only for a request with a
    NUMA topology or PCI devices (``CandidateFilterMixin``); building all
    of them up front cost 3 to 8 ms a decision at 1,000 hosts, garbage
    collections included. A read-only mapping equal to
    ``request.allocation_request(cands[index])``; ``index`` is the
    candidate's place in the sequence ``rank`` was given (the candidate
    itself is made only when read, see ``sources.picked.PickedBatch``).
    A copy is a plain dict."""

    __slots__ = ("cands", "index", "_body")

    def __init__(self, cands: Sequence[Candidate], index: int):
        self.cands = cands
        self.index = index
        self._body: dict | None = None

    def _built(self) -> dict:
        if self._body is None:
            self._body = allocation_request(self.cands[self.index])
        return self._body

    def __getitem__(self, key: str) -> Any:
        return self._built()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())

    def __repr__(self) -> str:
        return repr(self._built())

    def __copy__(self) -> dict:
        return dict(self._built())

    def __deepcopy__(self, memo: dict) -> dict:
        return copy.deepcopy(self._built(), memo)


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

    def host_states(self, groups: dict[str, list]) -> list:
        """nova's HostStates of the roots ``groups`` names (read once per
        call), in that order, each given its group as
        ``allocation_candidates``. Each state is touched once: at 1,000
        hosts every pass over nova's objects costs about a millisecond."""
        states = self.states
        missing = [r for r in groups if r not in states] if states else list(groups)
        for state in self.host_manager.get_host_states_by_uuids(
                self.context, missing, self.spec_obj) if missing else ():
            uuid = state.uuid
            states[uuid] = state
            state.allocation_candidates = groups[uuid]
        if len(missing) < len(groups):   # some were read for an earlier instance
            fresh = set(missing)
            for root, group in groups.items():
                if root not in fresh and root in states:
                    states[root].allocation_candidates = group
        return [states[r] for r in groups if r in states]

    def rank(self, cands: Sequence[Candidate]) -> list[float | None]:
        """Per candidate: its weight in nova's order (higher is better), or
        None when nova's host filters drop its host."""
        roots = getattr(cands, "roots", None)     # no candidate made
        if roots is None:
            roots = [c.root for c in cands]
        groups: dict[str, list] = {}
        for i, root in enumerate(roots):
            lazy = LazyAllocationRequest(cands, i)
            group = groups.get(root)
            if group is None:
                groups[root] = [lazy]
            else:
                group.append(lazy)
        order = self._nova_order(self.host_states(groups))
        out: list[float | None] = [None] * len(cands)
        weight = float(len(order))
        for host in order:
            for ar in host.allocation_candidates:
                # a filter keeps a subset of ours; anything else is not ours
                if type(ar) is LazyAllocationRequest:
                    out[ar.index] = weight
            weight -= 1.0
        return out

    def _nova_order(self, hosts: list) -> list:
        """The hosts nova's filters keep, in the order nova would try them."""
        passed = [h for h in self.host_manager.get_filtered_hosts(
                  hosts, self.spec_obj, self.index) if h.allocation_candidates]
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
