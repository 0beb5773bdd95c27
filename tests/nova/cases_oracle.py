"""The move oracle's vGPU rule in nova 34's own functional harness
(``scheduler_ext.lab.move_oracle``), built with nova's helpers (the
libvirt driver with nova's fake libvirt, pGPU child providers): a server
with a vGPU resized on its one host holds, during VERIFY_RESIZE, per pGPU
the larger of its old and new vGPU count, on the pGPU its vGPU was on, and
after confirm or revert its one vGPU there. Run by
``test_nova_functional.py``."""

from nova.tests.functional.libvirt import test_vgpu

from tests.nova.cases_nested import EngineOnly

IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"


class VGPUSameHostResizeSchedulerExt(EngineOnly, test_vgpu.VGPUTestBase):

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
        # VERIFY_RESIZE on the same host: max(1, 1) on the old pGPU
        self.assertEqual(before, self._vgpu_used())
        return server, before

    def test_same_host_resize_then_confirm_keeps_the_vgpu_on_its_pgpu(self):
        server, before = self._resized_in_place()
        self._confirm_resize(server)
        self.assertEqual(before, self._vgpu_used())

    def test_same_host_resize_then_revert_keeps_the_vgpu_on_its_pgpu(self):
        server, before = self._resized_in_place()
        self._revert_resize(server)
        self._wait_for_state_change(server, "ACTIVE")
        self.assertEqual(before, self._vgpu_used())
