"""The scheduler service's start in nova 34's functional harness: the
fleet view is read when the service starts, not inside the first request;
an unreachable placement database stops the start with an error that
names the option and the database's host; the start-up heap is frozen
once per process (``[scheduler_ext] freeze_start_heap``). Run by
``test_nova_functional.py`` (testtools, in a subprocess).
"""

import gc
from unittest import mock

from nova.tests.functional import integrated_helpers

from scheduler_ext import errors
from scheduler_ext.nova import manager as ext_manager, service
from scheduler_ext.nova.vector_filtering import VectorFilterHandler
from tests.nova.harness import OurCases


class ServiceStart(OurCases, integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = "fake.MediumFakeDriver"

    def test_the_fleet_is_read_when_the_service_starts(self):
        # the harness's scheduler service has started and was asked nothing
        self.assertTrue(self.scheduler_service.manager.ext.started)
        # nova's filters run on arrays in its host manager
        self.assertIs(type(self.scheduler_service.manager.host_manager.filter_handler),
                      VectorFilterHandler)
        self._start_compute(host="host1")
        rp = self._get_provider_uuid_by_host("host1")
        # a manager built after the compute registered, started as nova's
        # service starts it (no loop: nothing to stop afterwards)
        self.flags(reconcile_interval=0, group="scheduler_ext")
        self.flags(host_state_refresh_interval=2.5, group="scheduler_ext")
        manager = ext_manager.SchedulerManager()
        self.assertEqual(2.5, manager.host_manager.view.refresh_interval)
        self.assertFalse(manager.ext.started)
        manager.post_start_hook()
        self.assertTrue(manager.ext.started)
        view = manager.ext.scheduler().driver.upkeep
        self.assertIn(rp, view.index.row_of)
        self.assertGreater(view.full_read_s, 0.0)
        # and nova's host states, built from the cells' rows before any request
        built = [state.uuid for mirror in manager.host_manager.view.cells.values()
                 for state in mirror.built.values()]
        self.assertEqual([rp], built)

    def test_an_unreachable_placement_database_stops_the_start(self):
        # nothing listens on port 9 of the loopback
        self.flags(placement_database_connection=(
            "postgresql+psycopg2://nova:secret@127.0.0.1:9/placement"),
            group="scheduler_ext")
        manager = ext_manager.SchedulerManager()
        exc = self.assertRaises(errors.ConfigError, manager.post_start_hook)
        self.assertIn("placement_database_connection", str(exc))
        self.assertIn("127.0.0.1:9", str(exc))
        self.assertNotIn("secret", str(exc))
        self.assertFalse(manager.ext.started)

    def test_placement_down_at_start_delays_the_read_to_the_first_request(self):
        self.flags(reconcile_interval=0, group="scheduler_ext")
        manager = ext_manager.SchedulerManager()
        down = errors.PlacementUnavailable("placement is down")
        with mock.patch.object(manager.ext, "scheduler", side_effect=down):
            manager.post_start_hook()       # the service comes up
        self.assertFalse(manager.ext.started)
        manager.ext.scheduler()
        self.assertTrue(manager.ext.started)

    def test_the_start_up_heap_is_frozen_once(self):
        # the harness's scheduler service has started (default options)
        self.assertGreater(gc.get_freeze_count(), 0)
        frozen = gc.get_freeze_count()
        service.freeze_start_heap()         # a second start freezes nothing
        self.assertEqual(frozen, gc.get_freeze_count())
