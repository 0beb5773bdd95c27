"""nova 34's own functional tests for servers with QoS ports (bandwidth
and packet-rate child providers, granular request groups, ``same_subtree``)
and vGPU flavors (pGPU child providers), run with scheduler-ext's manager in
place of nova's. Run by ``test_nova_functional.py``.

Every test method is nova's, unchanged: boot, resize, migrate (with and
without a target host), evacuate, unshelve, reschedules, and the
allocations on the child providers after each. ``EngineOnly`` makes each
test also fail when a request that scheduler-ext should answer went to
nova's own scheduling code or to placement's candidates instead of the
engine: only rebuilds and evacuations (the instance still holds its
allocations) may go to nova.
"""

from nova.tests.functional.libvirt import test_vgpu
from nova.tests.functional import test_servers_resource_request as qos

from scheduler_ext.nova import request as nova_request
from scheduler_ext.nova import scheduler as nova_scheduler
from scheduler_ext.sources.engine import EngineCandidateSource
from scheduler_ext.sources.placement import PlacementCandidateSource
from tests.nova.harness import SchedulerExtMixin

#: reasons for which scheduler-ext hands a request to nova's own code
ALLOWED_TO_NOVA = ("a rebuild", "already holds allocations", "no instance uuids")


class EngineOnly(SchedulerExtMixin):
    """Counts which source answered each scheduling call of the test."""

    def setUp(self):
        self.answered = {"engine": 0, "placement": 0, "nova": []}
        self._count(EngineCandidateSource, "engine")
        self._count(PlacementCandidateSource, "placement")
        select = nova_scheduler.NovaScheduler.select
        answered = self.answered

        def spying_select(scheduler, *args, **kwargs):
            try:
                return select(scheduler, *args, **kwargs)
            except nova_request.UseNova as why:
                answered["nova"].append(str(why))
                raise

        self.stub_out("scheduler_ext.nova.scheduler.NovaScheduler.select", spying_select)
        super().setUp()
        self.addCleanup(self._check_engine_answered)

    def _count(self, cls, name):
        for method in ("candidates", "move_candidates"):
            original = getattr(cls, method)

            def counting(source, *args, _original=original, **kwargs):
                self.answered[name] += 1
                return _original(source, *args, **kwargs)

            self.stub_out(f"{cls.__module__}.{cls.__name__}.{method}", counting)

    def _check_engine_answered(self):
        to_nova = [r for r in self.answered["nova"]
                   if not any(a in r for a in ALLOWED_TO_NOVA)]
        self.assertEqual([], to_nova, "requests sent to nova's own code")
        self.assertEqual(0, self.answered["placement"],
                         "requests answered by placement's candidates")


class PortSchedulingSchedulerExt(EngineOnly,
                                 qos.PortResourceRequestBasedSchedulingTest):
    """Boot with QoS ports: bandwidth on the NIC providers under the
    compute node, one granular group per port."""


class PortMovesSchedulerExt(EngineOnly, qos.ServerMoveWithPortResourceRequestTest):
    """Resize, migrate, evacuate, unshelve with QoS ports: the allocations
    stay on (or move to) the right child providers."""


class MultiGroupPortSchedulingSchedulerExt(
        EngineOnly, qos.MultiGroupResourceRequestBasedSchedulingTest):
    """Ports asking bandwidth and packet rate: two granular groups per
    port tied by ``same_subtree``."""


class VGPUSchedulerExt(EngineOnly, test_vgpu.VGPUTests):
    """vGPU flavors: VGPU from pGPU child providers (libvirt driver with
    nova's fake libvirt); resize to another host and revert."""


class VGPUMultipleTypesSchedulerExt(EngineOnly, test_vgpu.VGPUMultipleTypesTests):
    """Several vGPU types on one host: the flavor's trait picks the pGPU."""
