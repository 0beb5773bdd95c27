"""A call's early reads (``early_reads``) and the worker threads they run
on (``workers``): the rules on their own, then in nova 34's functional
harness, where a boot and a resize each refresh the view once, on a
worker thread, and a resize finds its migration there. Run in a subprocess
with the other ``cases_*`` modules."""

import threading
import unittest
from unittest import mock

from scheduler_ext import errors
from scheduler_ext.nova import request as nova_request
from scheduler_ext.nova.early_reads import EarlyReads
from scheduler_ext.nova.workers import Workers
from scheduler_ext.sources.fleet_view import FleetView
from nova.tests.functional import integrated_helpers

from tests.nova.harness import OurCases

EARLY = "scheduler-ext-early-reads"


class WorkersRun(unittest.TestCase):

    def test_result_and_exception_come_back(self):
        workers = Workers("workers-test", 2)
        self.assertEqual(5, workers.submit(lambda a, b: a + b, 2, 3).result(5))
        failed = workers.submit(lambda: 1 / 0)
        with self.assertRaises(ZeroDivisionError):
            failed.result(5)
        name = workers.submit(lambda: threading.current_thread().name).result(5)
        self.assertIn(name, ("workers-test-0", "workers-test-1"))

    def test_one_worker_runs_in_the_order_given(self):
        workers, seen = Workers("workers-test"), []
        gate = threading.Event()
        workers.submit(gate.wait, 5)
        for n in range(20):
            workers.submit(seen.append, n)
        gate.set()
        workers.drain()
        self.assertEqual(list(range(20)), seen)


class EarlyReadsRules(unittest.TestCase):

    def setUp(self):
        self.workers = Workers("early-test", 3)
        self.refreshes = []

    def refresh(self):
        self.refreshes.append(threading.current_thread().name)

    def test_the_refresh_counts_once_per_call(self):
        early = EarlyReads(self.workers, self.refresh, None)
        self.assertTrue(early.refreshed())
        self.assertFalse(early.refreshed())     # a multi-create's next one
        self.assertEqual(1, len(self.refreshes))
        self.assertTrue(self.refreshes[0].startswith("early-test"))
        self.assertIsNone(early.move())

    def test_stale_when_another_decision_ran_meanwhile(self):
        lock, held, release = threading.Lock(), threading.Event(), threading.Event()

        def other_decision():
            with lock:
                held.set()
                release.wait(5)

        other = threading.Thread(target=other_decision)
        other.start()
        held.wait(5)
        early = EarlyReads(self.workers, self.refresh, None)
        threading.Timer(0.05, release.set).start()
        with early.turn(lock):
            self.assertFalse(early.refreshed())
        other.join(5)
        fresh = EarlyReads(self.workers, self.refresh, None)
        with fresh.turn(lock):      # free: nobody ran in between
            self.assertTrue(fresh.refreshed())
        self.assertFalse(lock.locked())

    def test_the_host_states_refresh_runs_on_a_worker_beside_the_driver_s(self):
        """The driver's refresh is waited for without the host states'
        (the ranking waits for those on the view's lock)."""
        release = threading.Event()
        done = []

        def host_states(services_taken):
            services_taken(74)
            release.wait(5)
            done.append(threading.current_thread().name)
            return True

        early = EarlyReads(self.workers, self.refresh, None, host_states)
        self.assertTrue(early.refreshed())
        self.assertEqual(1, len(self.refreshes))
        self.assertEqual([], done)
        release.set()
        self.workers.drain()
        self.assertEqual(1, len(done))
        self.assertTrue(done[0].startswith("early-test"), done)

    def test_the_compute_version_waits_for_the_services_half_only(self):
        release = threading.Event()

        def host_states(services_taken):
            services_taken(74)
            release.wait(5)         # the compute nodes' half
            return True

        early = EarlyReads(self.workers, self.refresh, None, host_states)
        self.assertEqual(74, early.compute_version())
        self.assertFalse(release.is_set())
        release.set()
        self.assertTrue(early.refreshed())
        self.assertIsNone(EarlyReads(self.workers, self.refresh, None).compute_version())

    def test_a_refresh_that_raised_before_the_services_gives_no_compute_version(self):
        def host_states(services_taken):
            raise RuntimeError("nova's cell database went away")

        early = EarlyReads(self.workers, self.refresh, None, host_states)
        with self.assertLogs("scheduler_ext.nova.early_reads", "ERROR"):
            self.assertIsNone(early.compute_version())      # nova asks the cells
        self.assertTrue(early.refreshed())      # the driver's refresh counts

    def test_errors_reach_the_caller(self):
        def down():
            raise errors.PlacementUnavailable("placement: connection refused")

        def no_records():
            raise RuntimeError("nova's database went away")

        early = EarlyReads(self.workers, down, no_records)
        with self.assertRaises(errors.PlacementUnavailable):
            early.refreshed()
        with self.assertRaisesRegex(RuntimeError, "database went away"):
            early.move()


class EarlyReadsInNova(OurCases, integrated_helpers.ProviderUsageBaseTestCase):
    """Through nova's API, conductor and our scheduler manager."""

    compute_driver = "fake.MediumFakeDriver"
    reconcile_loop = False

    def setUp(self):
        super().setUp()
        self.flags(allow_resize_to_same_host=True)
        self._start_compute(host="host1")
        self._start_compute(host="host2")
        self.small = self._create_flavor(name="small", vcpu=1, memory_mb=512,
                                         disk=1, ephemeral=0)
        self.large = self._create_flavor(name="large", vcpu=2, memory_mb=1024,
                                         disk=1, ephemeral=0)
        self.threads = {"refresh": [], "find_move": []}
        self.moves = []
        refresh, find_move = FleetView.refresh, nova_request.find_move

        def refresh_logged(view):
            self.threads["refresh"].append(threading.current_thread().name)
            return refresh(view)

        def find_move_logged(*args, **kwargs):
            self.threads["find_move"].append(threading.current_thread().name)
            self.moves.append(find_move(*args, **kwargs))
            return self.moves[-1]

        self._patch(FleetView, "refresh", refresh_logged)
        self._patch(nova_request, "find_move", find_move_logged)

    def _patch(self, owner, name, new):
        patcher = mock.patch.object(owner, name, new)
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_a_boot_refreshes_once_on_a_worker(self):
        self.threads["refresh"].clear()
        self.boot_on(self.small, "host1")
        self.assertEqual(1, len(self.threads["refresh"]), self.threads)
        self.assertTrue(self.threads["refresh"][0].startswith(EARLY), self.threads)
        self.assertEqual([], self.threads["find_move"])

    def test_a_resize_finds_its_migration_on_a_worker(self):
        server = self.boot_on(self.small, "host1")
        self.threads["refresh"].clear()
        server = self._resize_server(server, self.large)
        self.assertEqual("VERIFY_RESIZE", server["status"])
        for kind in ("refresh", "find_move"):
            self.assertEqual(1, len(self.threads[kind]), self.threads)
            self.assertTrue(self.threads[kind][0].startswith(EARLY), self.threads)
        migration = self.get_migration_uuid_for_instance(server["id"])
        # ours scheduled it as a move (not a boot handed back to nova)
        self.assertEqual(migration, self.moves[0].migration_uuid)
        host = server["OS-EXT-SRV-ATTR:host"]
        rp = self._get_provider_uuid_by_host(host)
        if host == "host1":     # same host: the instance holds both flavors
            self.assertHolds(migration, {})
        else:                   # the migration keeps the old flavor
            self.assertEqual(
                {self._get_provider_uuid_by_host("host1")},
                set(self.allocations_of(migration)))
        self.assertIn(rp, self.allocations_of(server["id"]))
