"""The move oracle's device rule in nova 34's own functional harness
(``scheduler_ext.lab.move_oracle``), built with nova's helpers (the
libvirt driver with nova's fake libvirt, pGPU child providers), each run
with ours and with nova's own scheduler: a server with a vGPU resized on
its one host holds, during VERIFY_RESIZE, the new vGPU beside the old one,
as stock nova does (issue 33, finding 5); after confirm the new one, after
revert the old one on its pGPU. And a server with QoS ports rescheduled
onto its source holds each port's bandwidth once, as stock nova does
(finding 3). Run by ``test_nova_functional.py``."""

from unittest import mock

from nova.compute import manager as compute_manager
from nova import context as nova_context
from nova import test
from nova.tests.fixtures import HostNameWeigherFixture
from nova.tests.functional.libvirt import test_vgpu
from nova.tests.functional import test_servers_resource_request as qos

from tests.nova.cases_nested import EngineOnly
from tests.nova.harness import PasteConfigMixin

IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"


class _VGPUSameHostResize:
    """A server with one vGPU resized on its one host (two pGPUs): nova
    gives the new flavor a new vGPU beside the old one, so during
    VERIFY_RESIZE the old pGPU keeps the old vGPU and one more is in use
    (on either pGPU: placement's candidate order decides); confirm frees
    the old one, revert the new one."""

    def setUp(self):
        super().setUp()
        self.flags(enabled_mdev_types=test_vgpu.fakelibvirt.NVIDIA_11_VGPU_TYPE,
                   group="devices")
        self.flags(allow_resize_to_same_host=True)
        self.compute1 = self.start_compute_with_vgpu("host1")
        self.flavor = self._create_flavor(extra_spec={"resources:VGPU": "1"})
        self.bigger = self._create_flavor(memory_mb=4096,
                                          extra_spec={"resources:VGPU": "1"})

    def _vgpu_used(self):
        """pGPU provider -> VGPU used, for the pGPUs in use."""
        root = self.compute_rp_uuids["host1"]
        used = {}
        for rp in self._get_all_rp_uuids_in_a_tree(root):
            n = self._get_provider_usages(rp).get("VGPU", 0)
            if n:
                used[rp] = n
        return used

    def _resized_in_place(self):
        server = self._create_server(image_uuid=IMAGE, flavor_id=self.flavor,
                                     host="host1", networks="auto",
                                     expected_state="ACTIVE")
        before = self._vgpu_used()
        self.assertEqual([1], list(before.values()))
        self._resize_server(server, self.bigger)    # host1 is the only host
        # VERIFY_RESIZE on the same host: the new vGPU beside the old one
        during = self._vgpu_used()
        self.assertEqual(2, sum(during.values()))
        (old_pgpu,) = before
        self.assertGreaterEqual(during.get(old_pgpu, 0), 1)
        return server, before, during

    def test_same_host_resize_then_confirm_keeps_the_new_vgpu(self):
        server, before, during = self._resized_in_place()
        self._confirm_resize(server)
        after = self._vgpu_used()
        self.assertEqual(1, sum(after.values()))
        (old_pgpu,) = before
        new = dict(during, **{old_pgpu: during[old_pgpu] - 1})
        self.assertEqual({rp: n for rp, n in new.items() if n}, after)

    def test_same_host_resize_then_revert_keeps_the_old_vgpu_on_its_pgpu(self):
        server, before, _ = self._resized_in_place()
        self._revert_resize(server)
        self._wait_for_state_change(server, "ACTIVE")
        self.assertEqual(before, self._vgpu_used())


class VGPUSameHostResizeSchedulerExt(EngineOnly, _VGPUSameHostResize,
                                     test_vgpu.VGPUTestBase):
    __doc__ = _VGPUSameHostResize.__doc__


class StockVGPUSameHostResize(PasteConfigMixin, _VGPUSameHostResize,
                              test_vgpu.VGPUTestBase):
    """The same with nova's own scheduler: the oracle."""


class _QoSPortRescheduleOntoSource:
    """A server with a QoS port resized; nova's weighers prefer host2, where
    ``prep_resize`` fails; the conductor reschedules onto the source
    (host1, offered as an alternate). Stock nova then holds the port's
    bandwidth once after confirm; so must we, reconcile included. (Built
    on nova's QoS test base only: none of nova's own tests run here.)"""

    BANDWIDTH = ("NET_BW_EGR_KILOBIT_PER_SEC", "NET_BW_IGR_KILOBIT_PER_SEC")

    def setUp(self):
        self.useFixture(HostNameWeigherFixture({"host1": 10, "host2": 100}))
        super().setUp()
        self.flags(allow_resize_to_same_host=True)
        compute2_rp = self._start_compute("host2") and \
            self._get_provider_uuid_by_host("host2")
        self._create_networking_rp_tree("host2", compute2_rp)
        self.bigger = self.admin_api.post_flavor({"flavor": {
            "ram": self.flavor_with_group_policy["ram"],
            "vcpus": self.flavor_with_group_policy["vcpus"],
            "name": self.flavor_with_group_policy["name"] + "+",
            "disk": self.flavor_with_group_policy["disk"] + 1}})
        self.admin_api.post_extra_spec(self.bigger["id"], {
            "extra_specs": {"group_policy": "isolate"}})

    def _reconcile(self):
        """Our reconcile run now (stock nova has none)."""

    def _bandwidth_used(self):
        used = {}
        for rp in self.placement.get("/resource_providers").body["resource_providers"]:
            for rc, n in self._get_provider_usages(rp["uuid"]).items():
                if rc in self.BANDWIDTH and n:
                    used[rp["name"]] = used.get(rp["name"], 0) + n
        return used

    def test_resize_rescheduled_onto_the_source_holds_the_port_once(self):
        server = self._create_server_with_ports(
            self.neutron.port_1, self.neutron.port_with_resource_request)
        booted = self._bandwidth_used()
        self.assertTrue(booted)
        calls = []
        original = compute_manager.ComputeManager._prep_resize

        def prep_resize_fails_first(manager, *args, **kwargs):
            calls.append(manager.host)
            if len(calls) == 1:
                raise test.TestingException("prep_resize fails on the first host")
            return original(manager, *args, **kwargs)

        with mock.patch.object(compute_manager.ComputeManager, "_prep_resize",
                               new=prep_resize_fails_first):
            self.api.post_server_action(server["id"], {"resize": {
                "flavorRef": self.bigger["id"]}})
            self._wait_for_state_change(server, "VERIFY_RESIZE", max_retries=30)
        self.assertEqual(["host2", "host1"], calls)
        self._reconcile()
        self._confirm_resize(server)
        self._reconcile()
        self.assertEqual(booted, self._bandwidth_used())


class QoSPortRescheduleOntoSourceSchedulerExt(
        EngineOnly, _QoSPortRescheduleOntoSource,
        qos.PortResourceRequestBasedSchedulingTestBase):
    __doc__ = _QoSPortRescheduleOntoSource.__doc__
    reconcile_loop = False

    def _reconcile(self):
        manager = self.scheduler_service.manager
        owner = manager if hasattr(manager, "reconcile_moves") else manager.driver
        owner.reconcile_moves(nova_context.get_admin_context())


class StockQoSPortRescheduleOntoSource(
        PasteConfigMixin, _QoSPortRescheduleOntoSource,
        qos.PortResourceRequestBasedSchedulingTestBase):
    """The same with nova's own scheduler: the oracle."""
