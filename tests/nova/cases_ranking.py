"""How ``NovaRanking`` hands our candidates to nova's filters, and how a
call's HostStates are dropped: the allocation requests in
``HostState.allocation_candidates`` are built only when a filter reads
them, and read as placement's would be (against nova 34's own
``CandidateFilterMixin``, no services); ``BackgroundRelease`` drops what
it is handed in its own thread, in a forked worker too. Run in a
subprocess with the other ``cases_*`` modules."""

import copy
import os
import threading
import types
import unittest
import uuid

from nova.scheduler import filters as nova_filters
from oslo_serialization import jsonutils

from scheduler_ext.nova import request as nova_request
from scheduler_ext.nova.garbage import BackgroundRelease
from scheduler_ext.nova.ranking import LazyAllocationRequest, NovaRanking
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

    def __init__(self, wanted: set[str] | None):
        self.wanted = wanted

    def host_passes(self, host, spec) -> bool:
        if self.wanted is None:     # a request without NUMA or PCI
            return True
        return bool(self.filter_candidates(host, lambda ar: set(
            ar["mappings"].get("_pci", ())) & self.wanted))


class _HostManager:
    """nova's HostManager surface NovaRanking calls; the filter is nova's
    mixin, the weight is the host's position in ``order``."""

    def __init__(self, order: list[str], host_filter: _MappingFilter):
        self.order = order
        self.filter = host_filter

    def get_host_states_by_uuids(self, context, uuids, spec):
        return [types.SimpleNamespace(uuid=u, allocation_candidates=[])
                for u in uuids]

    def get_filtered_hosts(self, hosts, spec, index):
        return [h for h in hosts if self.filter.host_passes(h, spec)]

    def get_weighed_hosts(self, hosts, spec):
        return sorted((types.SimpleNamespace(obj=h, weight=-self.order.index(h.uuid))
                       for h in hosts), key=lambda w: -w.weight)


class LazyAllocationRequests(unittest.TestCase):

    def test_reads_as_the_built_allocation_request(self):
        cand = _candidate(_u(), vf=_u())
        lazy = LazyAllocationRequest([_candidate(_u()) for _ in range(3)] + [cand], 3)
        built = nova_request.allocation_request(cand)
        self.assertEqual(built, dict(lazy))
        self.assertEqual(built, lazy)
        self.assertEqual(built["mappings"], lazy["mappings"])
        self.assertEqual(built, jsonutils.loads(jsonutils.dumps(
            jsonutils.to_primitive(lazy))))
        self.assertEqual(built, dict(copy.deepcopy(lazy)))
        # a copy is a plain dict: it does not drag the call's candidates
        self.assertIs(dict, type(copy.deepcopy(lazy)))
        self.assertIs(dict, type(copy.copy(lazy)))
        self.assertEqual(repr(built), repr(lazy))
        self.assertEqual(3, lazy.index)

    def test_not_built_unless_a_filter_reads_it(self):
        roots = [_u() for _ in range(4)]
        cands = [_candidate(r) for r in roots]
        manager = _HostManager(roots[::-1], _MappingFilter(None))
        ranking = NovaRanking(None, None, manager, limit=None)
        weights = ranking.rank(cands)
        # nova's order (reversed roots), as weights: best is highest
        self.assertEqual([1.0, 2.0, 3.0, 4.0], weights)
        for state in ranking.states.values():
            for ar in state.allocation_candidates:
                self.assertIsNone(ar._body)

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
        kept = ranking.states[roots[2]].allocation_candidates
        self.assertEqual([nova_request.allocation_request(c) for c in cands[4:]],
                         [dict(ar) for ar in kept])


class _Tracked:
    """Records the thread that drops it."""

    def __init__(self, log: list):
        self.log = log

    def __del__(self):
        self.log.append(threading.current_thread().name)


class ReleaseAfterTheAnswer(unittest.TestCase):

    def test_dropped_in_the_release_thread_not_the_caller(self):
        release, log = BackgroundRelease("release-test"), []
        holder = [_Tracked(log), _Tracked(log)]
        release.later(holder)
        self.assertEqual([], holder)
        release.drain()
        self.assertEqual(["release-test", "release-test"], log)

    def test_a_forked_worker_gets_its_own_thread(self):
        release, log = BackgroundRelease("release-test"), []
        release.later([_Tracked(log)])
        release.drain()
        pid = os.fork()
        if pid == 0:    # the child: the parent's thread does not exist here
            code = 1
            try:
                log.clear()
                release.later([_Tracked(log)])
                waiter = threading.Thread(target=release.drain, daemon=True)
                waiter.start()
                waiter.join(10)
                code = 0 if not waiter.is_alive() and log == ["release-test"] else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(0, os.waitstatus_to_exitcode(status))
