"""Move scenarios in nova 34's functional harness, scheduler-ext's manager
in place of nova's: in-process API, conductor, fake computes, placement
fixture, sqlite. Run by ``test_nova_functional.py`` (testtools, in a
subprocess).

Allocations are checked at every step against the table in doc/source/differences.rst
("Move allocations"): on a same-host pick the instance holds the per-class
maximum of old and new flavor and the migration nothing; on another host
the migration keeps the old flavor on the source and the instance holds the
new one on the destination; the reconcile trims what is left over. The loop is stopped in these
classes (``reconcile_loop = False``) so that the states between a move's end
and its reconcile can be looked at; ``ReconcileLoop`` runs it.
"""

import time

from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import instance_actions
from nova import context as nova_context
from nova import objects
import nova.conf as nova_conf
from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import integrated_helpers
from nova.tests.functional.regressions import test_bug_1790204

from tests.nova.harness import (Bug1790204Flavors, OurCases,
                                PasteConfigMixin, SchedulerExtMixin)


class NovaBug1790204(OurCases, Bug1790204Flavors,
                     test_bug_1790204.ResizeSameHostDoubledAllocations):
    reconcile_loop = False
    """nova's own regression test class for bug 1790204 (one
    SmallFakeDriver host: VCPU 2, MEMORY_MB 8192, DISK_GB 1028; flavor
    1 vCPU / 2048 MB / 1028 GB resized to 2 vCPU / 2048 MB / 1028 GB with
    allow_resize_to_same_host), with scheduler-ext's manager. Its own test
    method, which asserts the NoValidHost of the bug, is replaced by ours;
    ``NovaBug1790204Unmodified`` runs it unchanged."""

    def _resized(self):
        flavor1, flavor2 = self._flavors()
        rp = self._get_provider_uuid_by_host(uuids.host)
        server = self._boot_and_check_allocations(flavor1, uuids.host)
        server = self._resize_server(server, flavor2["id"])
        self.assertEqual("VERIFY_RESIZE", server["status"])
        self.assertEqual(uuids.host, server["OS-EXT-SRV-ATTR:host"])
        migration = self.get_migration_uuid_for_instance(server["id"])
        both = self.flavor_resources(flavor1, flavor2)
        self.assertHolds(server["id"], {rp: both})
        self.assertHolds(migration, {})
        self.assertUsage(rp, both)
        return flavor1, flavor2, rp, server, migration

    def test_resize_same_host_full_allocations(self):
        """The resize nova's test expects to fail with NoValidHost reaches
        VERIFY_RESIZE, and a confirm leaves exactly flavor2."""
        flavor1, flavor2, rp, server, migration = self._resized()
        self._confirm_resize(server)
        self.assertHolds(server["id"], {rp: self.flavor_resources(flavor2)})
        self.assertHolds(migration, {})
        self.reconcile()
        self.assertHolds(server["id"], {rp: self.flavor_resources(flavor2)})
        self.assertHolds(migration, {})
        self.assertUsage(rp, self.flavor_resources(flavor2))
        self._delete_and_check_allocations(server)

    def test_resize_same_host_revert_then_reconcile(self):
        """Revert: nova finds nothing on the migration and writes nothing;
        the reconcile leaves exactly flavor1."""
        flavor1, flavor2, rp, server, migration = self._resized()
        self._revert_resize(server)
        self.assertHolds(server["id"],
                         {rp: self.flavor_resources(flavor1, flavor2)})
        self.assertReconciled(self.reconcile(), server["id"])
        self.assertHolds(server["id"], {rp: self.flavor_resources(flavor1)})
        self.assertHolds(migration, {})
        self.assertUsage(rp, self.flavor_resources(flavor1))
        self._delete_and_check_allocations(server)

    def test_placement_unreachable_gives_no_valid_host(self):
        """nova's report client cannot reach placement (the fixture's
        requests fail to connect): the boot fails with NoValidHost, as with
        nova's own scheduler, not with an error of the scheduler service."""
        from keystoneauth1 import exceptions as ks_exc

        def unreachable(*args, **kwargs):
            raise ks_exc.ConnectFailure("placement unreachable")

        flavor1, _ = self._flavors()
        for verb in ("get", "put", "post", "delete"):
            self.stub_out("nova.scheduler.client.report."
                          f"SchedulerReportClient.{verb}", unreachable)
        req = self._build_server(
            image_uuid="155d900f-4e14-4e4c-a73d-069cbf4541e6",
            flavor_id=flavor1["id"], networks="none")
        server = self._wait_for_state_change(
            self.api.post_server({"server": req}), "ERROR")
        self.assertIn("No valid host was found", server["fault"]["message"])


class ReconcileLoop(OurCases, Bug1790204Flavors,
                    test_bug_1790204.ResizeSameHostDoubledAllocations):
    """The service's own reconcile loop (as a deployment runs it)."""

    test_resize_same_host_full_allocations = None   # nova's, asserts the bug

    def test_loop_runs_with_the_configured_interval(self):
        ext = self.scheduler_service.manager.ext
        self.assertEqual(3, nova_conf.CONF.scheduler_ext.reconcile_interval)
        self.assertTrue(ext._thread is not None and ext._thread.is_alive())

    def test_interval_zero_disables_the_loop(self):
        self.flags(reconcile_interval=0, group="scheduler_ext")
        self.scheduler_service.stop()
        self.scheduler_service = self.start_service("scheduler")
        self.assertIsNone(self.scheduler_service.manager.ext._thread)

    def test_revert_trimmed_by_the_loop(self):
        """A same-host revert is trimmed to flavor1 by the loop alone."""
        flavor1, flavor2 = self._flavors()
        rp = self._get_provider_uuid_by_host(uuids.host)
        server = self._boot_and_check_allocations(flavor1, uuids.host)
        server = self._resize_server(server, flavor2["id"])
        self._revert_resize(server)
        want = {rp: self.flavor_resources(flavor1)}
        deadline = time.monotonic() + 60
        while self.allocations_of(server["id"]) != want and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertHolds(server["id"], want)
        self.assertUsage(rp, self.flavor_resources(flavor1))


class NovaBug1790204Unmodified(SchedulerExtMixin,
                               test_bug_1790204.ResizeSameHostDoubledAllocations):
    """nova's regression test exactly as nova ships it. Under
    scheduler-ext it is expected to FAIL: its FIXME asserts the bug
    (NoValidHost), and the resize now succeeds."""


class StockNovaBug1790204(PasteConfigMixin,
                          test_bug_1790204.ResizeSameHostDoubledAllocations):
    """The same, with nova's own scheduler: passes (the bug is there)."""


class _TwoHosts(OurCases, integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = "fake.MediumFakeDriver"
    reconcile_loop = False

    def setUp(self):
        super().setUp()
        self.compute1 = self._start_compute(host="host1")
        self.compute2 = self._start_compute(host="host2")
        self.rp1 = self._get_provider_uuid_by_host("host1")
        self.rp2 = self._get_provider_uuid_by_host("host2")
        self.flags(allow_resize_to_same_host=True)
        # MediumFakeDriver: 10 vCPU, 8192 MB, 1028 GB of disk; DISK_GB has
        # allocation ratio 1.0, so disk is what fills a host here
        self.flavor1 = self._create_flavor(name="small", vcpu=1,
                                           memory_mb=1024, disk=10,
                                           ephemeral=0)
        self.flavor2 = self._create_flavor(name="large", vcpu=2,
                                           memory_mb=512, disk=20,
                                           ephemeral=0)
        self.f1 = self.flavor_resources(self._flavor(self.flavor1))
        self.f2 = self.flavor_resources(self._flavor(self.flavor2))
        self.both = self.flavor_resources(self._flavor(self.flavor1),
                                          self._flavor(self.flavor2))

    def _flavor(self, flavor_id):
        return self.api.get_flavor(flavor_id)


class SameHostPrepResizeFailureReschedules(_TwoHosts):
    """nova's weighers (HostNameWeigherFixture) rank the source first; its
    prep_resize fails; the conductor reschedules to the alternate host the
    scheduler returned, claiming its allocation request itself."""

    def setUp(self):
        super().setUp()
        self.useFixture(nova_fixtures.HostNameWeigherFixture(
            weights={"host1": 100, "host2": 10}))
        self.scheduler_service.stop()
        self.scheduler_service = self.start_service("scheduler")

    def _resize_with_failure_on_source(self):
        server = self._boot_and_check_allocations(self._flavor(self.flavor1),
                                                  "host1")
        seen = []
        real = self.compute1.manager.__class__._prep_resize

        def prep_resize(manager, *args, **kwargs):
            if manager.host == "host1":
                # the scheduler picked the source: the instance holds
                # max(old, new) there and the migration nothing
                migration = self.get_migration_uuid_for_instance(server["id"])
                seen.append((self.allocations_of(server["id"]),
                             self.allocations_of(migration)))
                raise test.TestingException("prep_resize fails on host1")
            return real(manager, *args, **kwargs)

        self.stub_out("nova.compute.manager.ComputeManager._prep_resize",
                      prep_resize)
        self.api.post_server_action(server["id"],
                                    {"resize": {"flavorRef": self.flavor2}})
        server = self._wait_for_state_change(server, "VERIFY_RESIZE")
        self.assertEqual("host2", server["OS-EXT-SRV-ATTR:host"])
        self.assertEqual([({self.rp1: self.both}, {})], seen)
        migration = self.get_migration_uuid_for_instance(server["id"])
        # the instance holds the new flavor on the alternate; the migration
        # was given what the instance held on the source (max)
        self.assertHolds(server["id"], {self.rp2: self.f2})
        self.assertHolds(migration, {self.rp1: self.both})
        # reconcile trims the migration to what a revert must restore
        self.assertReconciled(self.reconcile(), server["id"])
        self.assertHolds(migration, {self.rp1: self.f1})
        self.assertHolds(server["id"], {self.rp2: self.f2})
        self.assertUsage(self.rp1, self.f1)
        self.assertUsage(self.rp2, self.f2)
        return server, migration

    def test_confirm(self):
        server, migration = self._resize_with_failure_on_source()
        self._confirm_resize(server)
        self.assertHolds(server["id"], {self.rp2: self.f2})
        self.assertHolds(migration, {})
        self.assertUsage(self.rp1, {})
        self.assertReconciled(self.reconcile())
        self._delete_and_check_allocations(server)

    def test_revert(self):
        server, migration = self._resize_with_failure_on_source()
        self._revert_resize(server)
        self.assertHolds(server["id"], {self.rp1: self.f1})
        self.assertHolds(migration, {})
        self.assertUsage(self.rp2, {})
        self.assertReconciled(self.reconcile())
        self._delete_and_check_allocations(server)


class SameHostFinishResizeFailure(_TwoHosts):
    """A same-host resize fails in finish_resize (host2 disabled): nova puts
    the instance in ERROR, resets its record to the old flavor and keeps the
    new flavor's allocations. The reconcile holds what nova holds, and waits
    while nova's finish step has no result."""

    def _fail_in_finish(self):
        host2 = self.admin_api.get_services(host="host2",
                                            binary="nova-compute")[0]
        self.admin_api.put_service(host2["id"], {"status": "disabled"})
        server = self._boot_and_check_allocations(self._flavor(self.flavor1),
                                                  "host1")

        def fails(*args, **kwargs):
            raise test.TestingException("finish_resize fails")

        self.stub_out("nova.compute.manager.ComputeManager._finish_resize",
                      fails)
        self.api.post_server_action(server["id"],
                                    {"resize": {"flavorRef": self.flavor2}})
        self._wait_for_action_fail_completion(
            server, instance_actions.RESIZE, "compute_finish_resize")
        server = self._wait_for_state_change(server, "ERROR")
        self.assertEqual("small", server["flavor"]["original_name"])
        migration = self.get_migration_uuid_for_instance(server["id"])
        self.assertHolds(server["id"], {self.rp1: self.both})
        self.assertHolds(migration, {})
        return server, migration

    def test_reconcile_holds_the_new_flavor_as_nova_does(self):
        server, migration = self._fail_in_finish()
        self.assertReconciled(self.reconcile(), server["id"])
        # not the record's old flavor: nova keeps the new one here
        self.assertHolds(server["id"], {self.rp1: self.f2})
        self.assertHolds(migration, {})
        self._delete_and_check_allocations(server)

    def test_waits_while_the_finish_step_has_no_result(self):
        server, _ = self._fail_in_finish()
        ctxt = nova_context.get_admin_context()     # a request of its own
        objects.InstanceAction.action_start(ctxt, server["id"],
                                            instance_actions.RESIZE)
        objects.InstanceActionEvent.event_start(ctxt, server["id"],
                                                "compute_finish_resize")
        self.assertEqual("retry", self.reconcile()[server["id"]])
        self.assertHolds(server["id"], {self.rp1: self.both})


class WholeSecondChanges(_TwoHosts):
    """Issue 33 finding 9: on MySQL nova's ``updated_at`` is a whole-second
    DATETIME, so a confirm in the same second as ``finished`` gives the
    migration the same change time. The migration's times are set to one
    whole second here as MySQL would store them: the confirm is still
    reconciled (told apart by its status), the server trimmed."""

    def _stamp(self, migration_uuid, when):
        ctxt = nova_context.get_admin_context()
        mig = objects.Migration.get_by_uuid(ctxt, migration_uuid)
        mig.updated_at = when
        mig.save()

    def test_a_confirm_in_the_same_whole_second_as_finished_is_trimmed(self):
        host2 = self.admin_api.get_services(host="host2",
                                            binary="nova-compute")[0]
        self.admin_api.put_service(host2["id"], {"status": "disabled"})
        server = self._boot_and_check_allocations(self._flavor(self.flavor1),
                                                  "host1")
        server = self._resize_server(server, self.flavor2)
        migration = self.get_migration_uuid_for_instance(server["id"])
        self.assertHolds(server["id"], {self.rp1: self.both})
        second = objects.Migration.get_by_uuid(
            nova_context.get_admin_context(), migration).updated_at.replace(
                microsecond=0, tzinfo=None)
        self._stamp(migration, second)
        self.assertReconciled(self.reconcile(), server["id"])
        self.assertHolds(server["id"], {self.rp1: self.both})
        self._confirm_resize(server)
        self._stamp(migration, second)
        self.assertReconciled(self.reconcile(), server["id"])
        self.assertHolds(server["id"], {self.rp1: self.f2})


class ReconcileRacesAMove(_TwoHosts):
    """Issue 33 finding 7: nova's state read by the reconcile before a
    resize started, placement's read after (the resize is in
    VERIFY_RESIZE by then). nova's state is read again before the write:
    it differs, so the instance is a retry and nothing is written (planned
    from the stale state, the trim to the old flavor would take the
    resize's new flavor away); the retry finds them agreeing."""

    def test_a_resize_that_starts_while_the_reconcile_plans_makes_it_retry(self):
        from scheduler_ext.nova import reconcile as nova_reconcile
        host2 = self.admin_api.get_services(host="host2",
                                            binary="nova-compute")[0]
        self.admin_api.put_service(host2["id"], {"status": "disabled"})
        server = self._boot_and_check_allocations(self._flavor(self.flavor1),
                                                  "host1")
        server = self._resize_server(server, self.flavor2)
        server = self._revert_resize(server)
        self.assertHolds(server["id"], {self.rp1: self.both})   # to trim
        real = nova_reconcile.instance_state
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(ctxt, self.cell_mappings["cell1"]) as cctxt:
            stale = real(cctxt, server["id"])
        server = self._resize_server(server, self.flavor2)
        reads = []

        def instance_state(cctxt, uuid):
            reads.append(uuid)      # the first read is from before the resize
            return stale if len(reads) == 1 else real(cctxt, uuid)

        self.stub_out("scheduler_ext.nova.reconcile.instance_state",
                      instance_state)
        self.assertEqual("retry", self.reconcile()[server["id"]])
        self.assertEqual(2, len(reads))
        self.assertHolds(server["id"], {self.rp1: self.both})
        manager = self.scheduler_service.manager
        owner = manager if hasattr(manager, "ext") else manager.driver
        owner.ext.tracker.wake(server["id"])    # the retry, without backoff
        self.assertReconciled(self.reconcile(), server["id"])
        self.assertHolds(server["id"], {self.rp1: self.both})
        self._confirm_resize(server)
        self.assertReconciled(self.reconcile(), server["id"])
        self.assertHolds(server["id"], {self.rp1: self.f2})


class OnlySourceFits(_TwoHosts):
    """Two hosts; the other host is too full for the new flavor, the source
    fits it once the old flavor is released. Stock nova: NoValidHost
    (``StockOnlySourceFits``)."""

    def _filled(self):
        # host2: a server leaving 10 GB (20 needed); host1: our server
        # (10 GB) and one leaving 18 GB free, 28 once ours is released
        filler = self._create_flavor(name="filler", vcpu=1, memory_mb=512,
                                     disk=1018, ephemeral=0)
        self.boot_on(filler, "host2")
        server = self.boot_on(self.flavor1, "host1")
        blocker = self._create_flavor(name="blocker", vcpu=1, memory_mb=512,
                                      disk=1000, ephemeral=0)
        self.boot_on(blocker, "host1")
        self.assertUsage(self.rp1, {
            rc: self.f1[rc] + self.flavor_resources(self._flavor(blocker))[rc]
            for rc in self.f1})
        return server, self.flavor_resources(self._flavor(filler)), \
            self.flavor_resources(self._flavor(blocker))

    def test_resize_stays_on_source_then_confirm(self):
        server, on2, blocker = self._filled()
        server = self._resize_server(server, self.flavor2)
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
        migration = self.get_migration_uuid_for_instance(server["id"])
        self.assertHolds(server["id"], {self.rp1: self.both})
        self.assertHolds(migration, {})
        self.assertUsage(self.rp2, on2)
        self._confirm_resize(server)
        # flavor2 has less memory than flavor1: the instance keeps the
        # larger of both until the reconcile trims it (a decrease)
        self.assertHolds(server["id"], {self.rp1: self.both})
        self.assertHolds(migration, {})
        self.assertReconciled(self.reconcile(), server["id"])
        self.assertHolds(server["id"], {self.rp1: self.f2})
        self.assertHolds(migration, {})
        self.assertUsage(self.rp1, {rc: self.f2[rc] + blocker[rc]
                                    for rc in self.f2})
        self.assertUsage(self.rp2, on2)

    def test_resize_stays_on_source_then_revert(self):
        server, on2, blocker = self._filled()
        server = self._resize_server(server, self.flavor2)
        self.assertEqual("host1", server["OS-EXT-SRV-ATTR:host"])
        migration = self.get_migration_uuid_for_instance(server["id"])
        self._revert_resize(server)
        self.assertHolds(server["id"], {self.rp1: self.both})
        self.reconcile()
        self.assertHolds(server["id"], {self.rp1: self.f1})
        self.assertHolds(migration, {})
        self.assertUsage(self.rp1, {rc: self.f1[rc] + blocker[rc]
                                    for rc in self.f1})
        self.assertUsage(self.rp2, on2)


class StockOnlySourceFits(OnlySourceFits):
    """The same fleet with nova's own scheduler: the resize fails with
    NoValidHost (bug 1790204) and the source keeps the old flavor."""

    scheduler_manager = None

    def test_resize_stays_on_source_then_confirm(self):
        server, on2, blocker = self._filled()
        self.api.post_server_action(server["id"],
                                    {"resize": {"flavorRef": self.flavor2}})
        self._assert_resize_migrate_action_fail(
            server, instance_actions.RESIZE, "NoValidHost")
        self.assertHolds(server["id"], {self.rp1: self.f1})

    test_resize_stays_on_source_then_revert = None
