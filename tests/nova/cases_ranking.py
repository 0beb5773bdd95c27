"""How ``NovaRanking`` hands our candidates to nova's filters, and how a
call's HostStates are dropped: the allocation requests in
``HostState.allocation_candidates`` are built only when a filter reads
them, and read as placement's would be (against nova 34's own
``CandidateFilterMixin``, no services); ``DeferredDrop`` drops what
it is handed in its own thread, in a forked worker too. Run in a
subprocess with the other ``cases_*`` modules."""

import copy
import os
import threading
import types
import unittest
import uuid

from nova.scheduler import filters as nova_filters
from nova.scheduler import weights as nova_weights
from nova.scheduler.filters.compute_filter import ComputeFilter
from nova.scheduler.filters.image_props_filter import ImagePropertiesFilter
from nova.scheduler.filters.numa_topology_filter import NUMATopologyFilter
from nova.scheduler.filters.pci_passthrough_filter import PciPassthroughFilter
from oslo_serialization import jsonutils

from scheduler_ext.nova import request as nova_request
from scheduler_ext.nova.garbage import DeferredDrop
from scheduler_ext.nova.ranking import HostCandidates, NovaRanking, candidate_positions
from scheduler_ext.sources.base import Candidate


def _u() -> str:
    return str(uuid.uuid4())


SHARED = _u()


def _candidate(root: str, vf: str | None = None) -> Candidate:
    allocs = {root: {"VCPU": 2, "MEMORY_MB": 1024}, SHARED: {"DISK_GB": 10}}
    mappings = {"": [root, SHARED]}
    if vf is not None:
        allocs[vf] = {"CUSTOM_PCI_VF": 1}
        mappings["_pci"] = [vf]
    return Candidate(root=root, allocations=allocs, weight=1.0, mappings=mappings)


class _MappingFilter(nova_filters.CandidateFilterMixin):
    """A PCI-like filter: keeps the allocation candidates that map a group
    to one of ``wanted``, through nova's own ``filter_candidates``."""

    def __init__(self, wanted: set[str] | None, keep_emptied: bool = False):
        self.wanted = wanted
        #: pass a host whose candidates it removed (nova's own such filters
        #: drop it; a filter of an operator's may not)
        self.keep_emptied = keep_emptied

    def host_passes(self, host, spec) -> bool:
        if self.wanted is None:     # a request without NUMA or PCI
            return True
        kept = self.filter_candidates(host, lambda ar: set(
            ar["mappings"].get("_pci", ())) & self.wanted)
        return bool(kept) or self.keep_emptied


class _OperatorsFilter(nova_filters.BaseHostFilter):
    """A filter of an operator's (not nova's, not on the mixin)."""

    def host_passes(self, host, spec) -> bool:
        return bool(host.allocation_candidates)


class _OrderWeigher(nova_weights.BaseHostWeigher):
    """A weigher of an operator's (run as nova's code): the earlier a
    host in its manager's ``order``, the higher; records the hosts it
    was handed."""

    def __init__(self, manager: "_HostManager"):
        self.manager = manager

    def weigh_objects(self, weighed_obj_list, weight_properties):
        self.manager.weighed.append([w.obj.uuid for w in weighed_obj_list])
        return [-self.manager.order.index(w.obj.uuid) for w in weighed_obj_list]

    def _weigh_object(self, obj, weight_properties):
        raise AssertionError("weigh_objects is overridden")


class _HostManager:
    """nova's HostManager surface NovaRanking calls; the filter is nova's
    mixin, the weigher ranks by the host's position in ``order``."""

    def __init__(self, order: list[str], host_filter: _MappingFilter,
                 cell_order: list[str] | None = None):
        self.order = order
        self.filter = host_filter
        #: what nova's HostManager names its filters by (``hand_over``)
        self.enabled_filters = [host_filter]
        #: the order nova's database gives the states in (default: asked)
        self.cell_order = cell_order
        #: the hosts each call of the filters and the weighers was given
        self.filtered: list[list[str]] = []
        self.weighed: list[list[str]] = []
        self.weighers = [_OrderWeigher(self)]

    def get_host_states_by_uuids(self, context, uuids, spec):
        first = [u for u in self.cell_order or () if u in uuids]
        order = first + [u for u in uuids if u not in first]
        return [types.SimpleNamespace(uuid=u, allocation_candidates=[])
                for u in order]

    def get_filtered_hosts(self, hosts, spec, index):
        self.filtered.append([h.uuid for h in hosts])
        return [h for h in hosts if self.filter.host_passes(h, spec)]


class HostCandidatesRead(unittest.TestCase):

    def test_read_as_the_built_allocation_requests(self):
        cands = [_candidate(_u()) for _ in range(3)] + \
            [_candidate(_u(), vf=_u()), _candidate(_u(), vf=_u())]
        group = HostCandidates(cands, (3, 4))
        built = [nova_request.allocation_request(c) for c in cands[3:]]
        self.assertEqual(2, len(group))
        self.assertEqual(built, list(group))
        self.assertEqual(built[1], group[1])
        self.assertEqual(built[1:], list(group[1:]))
        self.assertEqual(built[0]["mappings"], group[0]["mappings"])
        self.assertEqual([3, 4], [ar.position for ar in group])
        self.assertTrue(all(isinstance(ar, dict) for ar in group))
        self.assertEqual(built, jsonutils.loads(jsonutils.dumps(
            jsonutils.to_primitive(list(group)))))
        self.assertEqual(built, copy.deepcopy(group))
        # a copy is plain: it does not drag the call's candidates along
        self.assertIs(list, type(copy.deepcopy(group)))
        self.assertIs(list, type(copy.copy(group)))
        self.assertIs(dict, type(copy.deepcopy(group[0])))
        self.assertIs(dict, type(copy.copy(group[0])))
        self.assertEqual(repr(built), repr(group))

    def test_a_host_with_several_candidates_gets_them_all(self):
        roots = [_u() for _ in range(3)]
        order = [roots[0], roots[1], roots[0], roots[2], roots[1], roots[0]]
        where = candidate_positions(order)
        self.assertEqual(roots, list(where))
        self.assertEqual([(0, 2, 5), (1, 4), (3,)], list(where.values()))
        self.assertEqual({r: (i,) for i, r in enumerate(roots)},
                         candidate_positions(iter(roots)))

    def test_not_built_unless_a_filter_reads_it(self):
        roots = [_u() for _ in range(4)]
        cands = [_candidate(r) for r in roots]
        manager = _HostManager(roots[::-1], _MappingFilter(None))
        ranking = NovaRanking(None, None, manager, limit=None)
        weights = ranking.rank(cands)
        # nova's order (reversed roots), as weights: best is highest
        self.assertEqual([1.0, 2.0, 3.0, 4.0], weights)
        for state in ranking.states.values():
            self.assertIsNone(state.allocation_candidates._built)

    def test_without_a_candidate_filter_the_states_keep_novas_own_list(self):
        # no enabled filter reads allocation candidates (nova's defaults):
        # nothing is handed over, and nova's order still maps back to ours
        roots = [_u() for _ in range(4)]
        order = [roots[0], roots[1], roots[0], roots[3], roots[2]]
        manager = _HostManager(roots[::-1], _MappingFilter(None))
        manager.enabled_filters = [ComputeFilter(), ImagePropertiesFilter()]
        ranking = NovaRanking(None, None, manager, limit=None)
        self.assertFalse(ranking.hand_over)
        weights = ranking.rank([_candidate(r) for r in order])
        self.assertEqual([1.0, 2.0, 1.0, 4.0, 3.0], weights)
        # nova's order as positions, a host's candidates in position order
        self.assertEqual([3, 4, 1, 0, 2], weights.best_first)
        for state in ranking.states.values():
            self.assertEqual([], state.allocation_candidates)

    def test_a_candidate_filter_or_a_filter_not_novas_gets_them(self):
        manager = _HostManager([], _MappingFilter(None))
        for enabled in ([ComputeFilter(), NUMATopologyFilter()],
                        [ComputeFilter(), PciPassthroughFilter()],
                        [ComputeFilter(), _MappingFilter(None)],
                        [ComputeFilter(), _OperatorsFilter()]):
            manager.enabled_filters = enabled
            self.assertTrue(NovaRanking(None, None, manager, limit=None).hand_over,
                            enabled)

    def test_a_filter_keeps_the_candidates_whose_mapping_it_accepts(self):
        roots = [_u() for _ in range(3)]
        vfs = [_u() for _ in range(6)]
        # two candidates per host, each mapping the PCI group to its own VF
        cands = [_candidate(roots[i // 2], vf=vfs[i]) for i in range(6)]
        wanted = {vfs[1], vfs[4], vfs[5]}   # host 0: 2nd, host 1: none, host 2: both
        manager = _HostManager(roots, _MappingFilter(wanted))
        ranking = NovaRanking(None, None, manager, limit=None)
        weights = ranking.rank(cands)
        self.assertEqual([None, 2.0, None, None, 1.0, 1.0], weights)
        self.assertEqual([1, 4, 5], weights.best_first)
        kept = ranking.states[roots[2]].allocation_candidates
        self.assertEqual([nova_request.allocation_request(c) for c in cands[4:]],
                         [dict(ar) for ar in kept])

    def test_a_host_left_without_candidates_is_weighed_then_skipped(self):
        # nova weighs every host its filters pass (the weighers normalise
        # over them) and its claim loop skips one left without candidates
        roots = [_u() for _ in range(3)]
        vfs = [_u() for _ in range(3)]
        cands = [_candidate(roots[i], vf=vfs[i]) for i in range(3)]
        manager = _HostManager(roots, _MappingFilter({vfs[0], vfs[2]},
                                                     keep_emptied=True))
        ranking = NovaRanking(None, None, manager, limit=None)
        weights = ranking.rank(cands)
        self.assertEqual([roots], manager.weighed)
        self.assertEqual([3.0, None, 1.0], weights)
        self.assertEqual([0, 2], weights.best_first)
        self.assertEqual([], ranking.states[roots[1]].allocation_candidates)
        self.assertEqual([0], [ar.position for ar in
                               ranking.states[roots[0]].allocation_candidates])

    def test_the_filters_get_the_hosts_in_novas_order(self):
        # stock nova hands its filters the states in the order its cell
        # database gives them, whatever order placement's candidates had
        roots = [_u() for _ in range(5)]
        cell_order = [roots[2], roots[0], roots[3], roots[1]]
        manager = _HostManager(roots, _MappingFilter(None), cell_order)
        ranking = NovaRanking(None, None, manager, limit=None)
        ranking.rank([_candidate(r) for r in roots[:4]])
        self.assertEqual([cell_order], manager.filtered)
        # a look-up by uuid before and after the mapping of all is built
        self.assertEqual(roots[2], ranking.state(roots[2]).uuid)
        self.assertIsNone(ranking.state(roots[4]))      # not read yet
        self.assertIs(ranking.states[roots[2]], ranking.state(roots[2]))
        # a later instance of a multi-create, one host new to the call
        more = roots[1:]
        ranking.index = 1
        ranking.rank([_candidate(r) for r in more])
        self.assertEqual(more, manager.filtered[1])
        self.assertEqual(5, len(ranking.states))
        self.assertEqual(roots[4], ranking.state(roots[4]).uuid)


class _Tracked:
    """Records the thread that drops it."""

    def __init__(self, log: list):
        self.log = log

    def __del__(self):
        self.log.append(threading.current_thread().name)


class DroppedAfterTheAnswer(unittest.TestCase):

    def test_dropped_in_the_drop_thread_not_the_caller(self):
        drop, log = DeferredDrop("drop-test"), []
        holder = [_Tracked(log), _Tracked(log)]
        drop.later(holder)
        self.assertEqual([], holder)
        drop.drain()
        self.assertEqual(["drop-test", "drop-test"], log)

    def test_a_forked_worker_gets_its_own_thread(self):
        drop, log = DeferredDrop("drop-test"), []
        drop.later([_Tracked(log)])
        drop.drain()
        pid = os.fork()
        if pid == 0:    # the child: the parent's thread does not exist here
            code = 1
            try:
                log.clear()
                drop.later([_Tracked(log)])
                waiter = threading.Thread(target=drop.drain, daemon=True)
                waiter.start()
                waiter.join(10)
                code = 0 if not waiter.is_alive() and log == ["drop-test"] else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(0, os.waitstatus_to_exitcode(status))
