"""nova 34's libvirt driver beside a DISK_GB sharing provider, in nova's
functional harness (fake libvirt, placement fixture), and the DISK_GB data
migration run there through nova's own report client: what the compute
node reports, which setting keeps it from offering DISK_GB afterwards, and
where a server's disk lands. Run by ``test_nova_functional.py``
(testtools, in a subprocess).
"""

from unittest.mock import ANY as mock_any

from oslo_utils.fixture import uuidsentinel as uuids
import fixtures

from nova import conf
from nova.scheduler.client import report
from nova.tests.functional import integrated_helpers as nova_helpers
from nova.tests.functional.libvirt import integrated_helpers

from scheduler_ext.nova import placement_client
from nova.tests.functional.api import client as api_client

from scheduler_ext.storage import (
    compute_api, diskmigration, evacuation_disk, evacuation_run,
    livemigration_check)
from scheduler_ext.storage.errors import StorageError
from scheduler_ext.storage.fencing_policy import Policy
from scheduler_ext.storage.report import HostReport
from tests.nova.harness import OurCases, PasteConfigMixin

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


class HarnessCompute:
    """``compute_api.ComputeEndpoint`` over nova's functional API client."""

    def __init__(self, client):
        self.client = client
        self.client.microversion = compute_api.MICROVERSION

    def get(self, path):
        return self.client.api_get(path).body

    def post(self, path, body):
        """nova's refusal as ``KeystoneCompute`` raises it."""
        try:
            return self.client.api_post(path, body).body
        except api_client.OpenStackApiException as exc:
            raise StorageError(f"compute API POST {path}: {exc}") from None


GPFS_FS = "gpfs:0123/gpfs1"
GPFS = GPFS_FS + ":/instances"
NFS_FS = "nfs:10.0.0.20:/export/nova"


def shared_report(host, domain, filesystem):
    return HostReport(host=host, path="/var/lib/nova/instances",
                      state="shared", fstype="gpfs", fs_class="parallel",
                      family=domain.split(":")[0], domain=domain,
                      filesystem=filesystem, total_bytes=1000 * 1024 ** 3)


class EvacuatePlannerInNova(OurCases, nova_helpers.ProviderUsageBaseTestCase):
    """``evacuate plan``/``run`` against nova's API: a compute service
    stopped and forced down has its servers evacuated to hosts of its
    storage domain; with the storage quorum lost it refuses."""

    compute_driver = "fake.MediumFakeDriver"

    def setUp(self):
        super().setUp()
        for host in ("host1", "host2", "host3", "host4"):
            setattr(self, host, self._start_compute(host))
        self.reports = {h: shared_report(h, GPFS, GPFS_FS)
                        for h in ("host1", "host2", "host3")}
        self.reports["host4"] = shared_report("host4", NFS_FS + ":/", NFS_FS)
        self.endpoint = HarnessCompute(self.admin_api)   # microversion 2.74
        self.servers = [self._create_server(
            networks="none", host="host1", api=self.admin_api)
            for _ in range(2)]

    def _force_down(self, host):
        service = self.admin_api.get_services(host=host,
                                              binary="nova-compute")[0]
        getattr(self, host).stop()
        self.admin_api.put_service(service["id"], {"forced_down": "true"})

    def _tick(self, view=None, state=None):
        return evacuation_run.tick(self.endpoint, self.reports, Policy(),
                                   1000.0, state, view)

    def test_a_forced_down_host_is_evacuated_within_its_storage_domain(self):
        healthy = self._tick()
        self.assertEqual([], healthy.actions)
        self._force_down("host1")
        planned = self._tick()
        moves = [a for a in planned.actions if a.kind == "evacuate"]
        self.assertEqual(sorted(s["id"] for s in self.servers),
                         sorted(a.instance for a in moves))
        self.assertEqual({"host2", "host3"}, {a.destination for a in moves})
        self.assertEqual([], evacuation_run.execute(self.endpoint,
                                                    planned))
        for server, move in zip(sorted(self.servers, key=lambda s: s["id"]),
                                sorted(moves, key=lambda a: a.instance)):
            self._wait_for_server_parameter(
                server, {"OS-EXT-SRV-ATTR:host": move.destination,
                         "status": "ACTIVE"})
        # the next tick, from the saved state, has nothing left to do
        again = self._tick(state=planned.state)
        self.assertEqual([], [a for a in again.actions if a.kind == "evacuate"])

    def test_storage_quorum_lost_refuses_to_evacuate(self):
        self._force_down("host1")
        view = evacuation_run.StorageView(
            frozenset({"host1", "host2", "host3"}), frozenset({"host2"}))
        planned = self._tick(view)
        self.assertEqual([("log", "host1"), ("alert", GPFS_FS)],
                         [(a.kind, a.host) for a in planned.actions])
        self.assertEqual("fence confirmed by hand", planned.actions[0].reason)
        self.assertIn("storage quorum lost: 1 of 3 quorum members up",
                      planned.actions[1].reason)
        self.assertEqual([], evacuation_run.execute(self.endpoint,
                                                    planned))
        for server in self.servers:
            self.assertEqual("host1", self.admin_api.get_server(
                server["id"])["OS-EXT-SRV-ATTR:host"])


class LiveMigrationCheckInNova(OurCases, nova_helpers.ProviderUsageBaseTestCase):
    """``storage live-migration`` reads the server from nova's API."""

    compute_driver = "fake.MediumFakeDriver"

    def test_a_server_on_shared_storage_moves_without_a_copy(self):
        for host in ("host1", "host2", "host3"):
            self._start_compute(host)
        endpoint = HarnessCompute(self.admin_api)        # microversion 2.74
        server = self._create_server(networks="none", host="host1",
                                     api=self.admin_api)
        reports = {"host1": shared_report("host1", GPFS, GPFS_FS),
                   "host2": shared_report("host2", GPFS, GPFS_FS),
                   "host3": HostReport("host3", "/var/lib/nova/instances",
                                       "local")}
        shared = livemigration_check.check(endpoint, server["id"], "host2",
                                           reports)
        self.assertEqual(("host1", "no copy", ()),
                         (shared.source, shared.decision.summary(),
                          shared.decision.hazards))
        local = livemigration_check.check(endpoint, server["id"], "host3",
                                          reports)
        self.assertEqual("block: disk", local.decision.summary())
        self.assertFalse(local.disks.volume_backed)


class StockMovesBypassingTheScheduler(PasteConfigMixin,
                                      nova_helpers.ProviderUsageBaseTestCase):
    """Seed 000: forced live migration and evacuation skip (part of) the
    scheduler. With nova's own scheduler, a server whose DISK_GB is on a
    sharing provider (the compute nodes closed by ``migrate-disk``): what
    each move leaves there. Observations of stock nova 34, pinned: nothing
    is lost any more, but a forced live migration is refused and an
    evacuation to a named host finds no valid host."""

    compute_driver = "fake.MediumFakeDriver"

    def setUp(self):
        super().setUp()
        for host in ("host1", "host2"):
            setattr(self, host, self._start_compute(host))
        self.shared = self._post_resource_provider("shared-storage:test")["uuid"]
        self._set_inventory(self.shared, {
            "resource_class": "DISK_GB", "total": 1000, "reserved": 0,
            "min_unit": 1, "max_unit": 1000, "step_size": 1,
            "allocation_ratio": 1.0})
        self._set_provider_traits(self.shared, ["MISC_SHARES_VIA_AGGREGATE"])
        for rp in [self.shared] + [self._get_provider_uuid_by_host(h)
                                   for h in ("host1", "host2")]:
            self._set_aggregate(rp, uuids.shared_disk)
        client = placement_client.from_report_client(
            report.report_client_singleton())
        result = diskmigration.apply(client, diskmigration.plan(client))
        self.assertEqual(2, len(result.closed))
        self.admin_api.microversion = "2.67"     # force=True is gone in 2.68
        # not onto a given host: nova then asks placement in_tree of that
        # host, which leaves the sharing provider out (NoValidHost)
        self.server = self._create_server(networks="none", api=self.admin_api)
        self.source = self.server["OS-EXT-SRV-ATTR:host"]
        self.dest = "host2" if self.source == "host1" else "host1"
        self.assertEqual({self.shared: 1}, self._disk())

    def _disk(self):
        allocs = self._get_allocations_by_server_uuid(self.server["id"])
        return {rp: a["resources"]["DISK_GB"] for rp, a in allocs.items()
                if "DISK_GB" in a["resources"]}

    def _force_down_source(self):
        service = self.admin_api.get_services(host=self.source,
                                              binary="nova-compute")[0]
        getattr(self, self.source).stop()
        self.admin_api.put_service(service["id"], {"forced_down": "true"})

    def test_a_forced_live_migration_is_refused(self):
        # nova 34 no longer loses the sharing allocation: it refuses to
        # force a move of an instance with allocations beyond its node
        self.admin_api.post_server_action(self.server["id"], {
            "os-migrateLive": {"host": self.dest, "block_migration": "auto",
                               "force": True}})
        self._wait_for_migration_status(self.server, ["error"])
        server = self.admin_api.get_server(self.server["id"])
        self.assertEqual((self.source, "ACTIVE"),
                         (server["OS-EXT-SRV-ATTR:host"], server["status"]))
        self.assertEqual({self.shared: 1}, self._disk())

    def test_an_evacuation_to_a_named_host_finds_no_valid_host(self):
        # a named destination is asked of placement in_tree of that host,
        # which leaves the sharing provider out: no candidate
        self._force_down_source()
        self.admin_api.microversion = "2.74"
        self.admin_api.post_server_action(self.server["id"],
                                          {"evacuate": {"host": self.dest}})
        self._wait_for_migration_status(self.server, ["error"])
        server = self.admin_api.get_server(self.server["id"])
        self.assertEqual(self.source, server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual({self.shared: 1}, self._disk())

    def test_an_evacuation_the_scheduler_places_keeps_the_disk_once(self):
        self._force_down_source()
        self.admin_api.microversion = "2.74"
        self.admin_api.post_server_action(self.server["id"], {"evacuate": {}})
        self._wait_for_server_parameter(self.server, {
            "OS-EXT-SRV-ATTR:host": self.dest, "status": "ACTIVE"})
        self._wait_for_migration_status(self.server, ["done"])
        self.assertEqual({self.shared: 1}, self._disk())
        self.assertEqual(1, self._get_provider_usages(self.shared)["DISK_GB"])


    def _evacuate_tick(self, reports, state=None, now=1000.0):
        self.admin_api.microversion = "2.74"
        endpoint = HarnessCompute(self.admin_api)
        client = placement_client.from_report_client(
            report.report_client_singleton())
        disks = evacuation_disk.PlacementDisk(client, endpoint)
        return endpoint, evacuation_run.tick(endpoint, reports, Policy(), now,
                                             state, disks=disks)

    def _third_shared_host(self):
        """host3 in the sharing aggregate, closed like the others: a GPFS
        cluster of three (one fenced host keeps the storage quorum, and is
        under the mass-failure brake)."""
        self.host3 = self._start_compute("host3")
        self._set_aggregate(self._get_provider_uuid_by_host("host3"),
                            uuids.shared_disk)
        client = placement_client.from_report_client(
            report.report_client_singleton())
        result = diskmigration.apply(client, diskmigration.plan(client))
        self.assertEqual(1, len(result.closed))
        return {h: shared_report(h, GPFS, GPFS_FS)
                for h in ("host1", "host2", "host3")}

    def test_evacuate_run_leaves_the_host_to_nova_within_the_domain(self):
        # every compute node closed, every host of one domain: naming a
        # host would find no valid host, so evacuate run names none
        reports = self._third_shared_host()
        self._force_down_source()
        endpoint, tick = self._evacuate_tick(reports)
        self.assertEqual([(self.server["id"], None)],
                         [(a.instance, a.destination) for a in tick.actions
                          if a.kind == "evacuate"])
        self.assertEqual([], evacuation_run.execute(endpoint, tick))
        self._wait_for_migration_status(self.server, ["done"])
        server = self.admin_api.get_server(self.server["id"])
        self.assertIn(server["OS-EXT-SRV-ATTR:host"],
                      {"host1", "host2", "host3"} - {self.source})
        self.assertEqual("ACTIVE", server["status"])
        self.assertEqual({self.shared: 1}, self._disk())
        # the next tick follows it to its end: evacuated, nothing failed
        _, again = self._evacuate_tick(reports, tick.state, 1100.0)
        self.assertEqual([("log", self.server["id"])],
                         [(a.kind, a.instance) for a in again.actions
                          if a.instance])
        self.assertEqual({}, again.state["evacuations"])

    def test_evacuate_run_refuses_when_nova_could_leave_the_domain(self):
        # host4 (local storage, DISK_GB of its own) is a host nova's
        # scheduler could choose: the server is refused, not posted
        reports = self._third_shared_host()
        self._start_compute("host4")
        reports["host4"] = HostReport("host4", "/var/lib/nova/instances",
                                      "local")
        self._force_down_source()
        endpoint, tick = self._evacuate_tick(reports)
        alerts = [a for a in tick.actions if a.instance == self.server["id"]]
        self.assertEqual(["alert"], [a.kind for a in alerts])
        self.assertIn("nova's scheduler could choose host4", alerts[0].reason)
        self.assertEqual([], evacuation_run.execute(endpoint, tick))
        server = self.admin_api.get_server(self.server["id"])
        self.assertEqual(self.source, server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual({self.shared: 1}, self._disk())


    def test_a_named_evacuation_that_fails_is_retried_then_alerted(self):
        # without placement access evacuate run names a host; nova's 202
        # ends with the server still on its fenced source (NoValidHost):
        # the next tick sees it and retries on the other host, the third
        # alerts (2 attempts) and posts nothing more
        reports = self._third_shared_host()
        self._force_down_source()
        self.admin_api.microversion = "2.74"
        endpoint = HarnessCompute(self.admin_api)
        policy = Policy(evacuation_attempts=2)
        state, seen = None, []
        for n in range(3):
            tick = evacuation_run.tick(endpoint, reports, policy,
                                       1000.0 + 100 * n, state)
            evacuation_run.execute(endpoint, tick)
            state = tick.state
            seen.append([(a.kind, a.destination) for a in tick.actions
                         if a.instance == self.server["id"]])
            if ("evacuate", mock_any) in seen[-1]:
                self._wait_for_server_parameter(
                    self.server, {"OS-EXT-STS:task_state": None,
                                  "OS-EXT-SRV-ATTR:host": self.source})
        first, second = sorted({"host1", "host2", "host3"} - {self.source})
        self.assertEqual([[("evacuate", first)],
                          [("evacuation-failed", first), ("evacuate", second)],
                          [("alert", second)]], seen)
        server = self.admin_api.get_server(self.server["id"])
        self.assertEqual((self.source, "ERROR"),
                         (server["OS-EXT-SRV-ATTR:host"], server["status"]))
        self.assertEqual({self.shared: 1}, self._disk())


class OurMovesBypassingTheScheduler(OurCases, StockMovesBypassingTheScheduler):
    """The same with scheduler-ext's scheduler: the same three outcomes (the
    named-host evacuation is asked of placement in_tree by nova's
    conductor, whichever scheduler serves it)."""
