"""nova 34's libvirt driver beside a DISK_GB sharing provider, in nova's
functional harness (fake libvirt, placement fixture), and the DISK_GB data
migration run there through nova's own report client: what the compute
node reports, which setting keeps it from offering DISK_GB afterwards, and
where a server's disk lands. Run by ``test_nova_functional.py``
(testtools, in a subprocess).
"""

from oslo_utils.fixture import uuidsentinel as uuids
import fixtures

from nova import conf
from nova.scheduler.client import report
from nova.tests.functional.libvirt import integrated_helpers

from scheduler_ext.nova import placement_client
from scheduler_ext.storage import diskmigration
from tests.nova.harness import OurCases

CONF = conf.CONF
DISK_GIB = 128


class SharedDiskMigration(OurCases,
                          integrated_helpers.LibvirtProviderUsageBaseTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatch(
            "nova.virt.libvirt.driver.LibvirtDriver._get_local_gb_info",
            return_value={"total": DISK_GIB, "used": 4, "free": DISK_GIB - 4}))
        self.start_compute()
        self.client = placement_client.from_report_client(
            report.report_client_singleton())

    def _sharing_provider(self):
        shared = self._post_resource_provider("shared-storage:gpfs:test")
        self._set_inventory(shared["uuid"], {
            "resource_class": "DISK_GB", "total": 1000, "reserved": 0,
            "min_unit": 1, "max_unit": 1000, "step_size": 1,
            "allocation_ratio": 1.0})
        self._set_provider_traits(shared["uuid"], ["MISC_SHARES_VIA_AGGREGATE"])
        self._set_aggregate(shared["uuid"], uuids.shared_disk)
        self._set_aggregate(self.host_uuid, uuids.shared_disk)
        return shared["uuid"]

    def _boot(self):
        return self._create_server(
            image_uuid="155d900f-4e14-4e4c-a73d-069cbf4541e6", flavor_id=1,
            networks="none")

    def _refresh(self):
        """The resource update after nova's cache of the provider tree is
        refreshed from placement (every [compute]
        resource_provider_association_refresh seconds; until then nova
        compares with what it last wrote and writes nothing)."""
        self.compute.manager.rt.reportclient.clear_provider_cache()
        self._run_periodics()

    def _disk(self, server):
        allocs = self._get_allocations_by_server_uuid(server["id"])
        return {rp: a["resources"]["DISK_GB"] for rp, a in allocs.items()
                if "DISK_GB" in a["resources"]}

    def _migrated(self):
        """A server booted before the sharing provider, the sharing
        provider, and the migration applied."""
        server = self._boot()
        self.assertEqual({self.host_uuid: 1}, self._disk(server))
        shared = self._sharing_provider()
        self._run_periodics()
        # nova 34 reports the compute node's DISK_GB beside the sharing
        # provider (bug 1784020)
        self.assertEqual(DISK_GIB,
                         self._get_provider_inventory(self.host_uuid)
                         ["DISK_GB"]["total"])
        result = diskmigration.apply(self.client, diskmigration.plan(self.client))
        self.assertEqual(({}, 1, 1),
                         (result.failed, len(result.moved), len(result.closed)))
        self.assertEqual({shared: 1}, self._disk(server))
        return shared

    def test_libvirt_keeps_reporting_disk_gb_beside_a_sharing_provider(self):
        self._sharing_provider()
        self._run_periodics()
        inv = self._get_provider_inventory(self.host_uuid)
        self.assertEqual(DISK_GIB, inv["DISK_GB"]["total"])
        self.assertEqual(1.0, inv["DISK_GB"]["allocation_ratio"])

    def test_with_disk_allocation_ratio_unset_nova_keeps_the_closed_node(self):
        self.assertIsNone(CONF.disk_allocation_ratio)
        shared = self._migrated()
        self._run_periodics()
        self._refresh()
        disk = self._get_provider_inventory(self.host_uuid)["DISK_GB"]
        self.assertEqual(DISK_GIB, disk["total"])          # still reported
        self.assertLess((disk["total"] - disk["reserved"]) *
                        disk["allocation_ratio"], 1)       # offers nothing
        # a new server's disk lands on the sharing provider only
        server = self._boot()
        self.assertEqual({shared: 1}, self._disk(server))
        # and the migration has nothing more to do
        again = diskmigration.plan(self.client)
        self.assertEqual(([], []), (again.moves, again.to_close))

    def test_disk_allocation_ratio_zero_is_read_as_unset(self):
        self._migrated()
        self.flags(disk_allocation_ratio=0.0)
        self._refresh()
        disk = self._get_provider_inventory(self.host_uuid)["DISK_GB"]
        self.assertLess(disk["total"] * disk["allocation_ratio"], 1)

    def test_a_disk_allocation_ratio_set_reopens_the_compute_node(self):
        self._migrated()
        self.flags(disk_allocation_ratio=1.0)
        self._refresh()
        disk = self._get_provider_inventory(self.host_uuid)["DISK_GB"]
        self.assertEqual(1.0, disk["allocation_ratio"])
        plan = diskmigration.plan(self.client)
        self.assertEqual(1, len(plan.to_close))       # the next run closes it
