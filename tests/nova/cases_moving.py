"""nova's own ``ServerMovingTests`` (nova/tests/functional/test_servers.py),
run with scheduler-ext's manager in place of nova's, and unchanged with
nova's for comparison. Run by ``test_nova_functional.py``.

Every test method is nova's. Three helpers are overridden because they
assert nova's own accounting of a same-host resize, the very state
scheduler-ext changes (README, "Move allocations"):

* ``_resize_to_same_host_and_check_allocations``: nova expects the new
  flavor on the instance plus the old one on the migration (usage = the
  sum); scheduler-ext gives the instance the per-class maximum and the
  migration nothing.
* ``_test_resize_to_same_host_instance_fails``: same intermediate check
  (asserted inside the failing compute method). End state after the
  periodic reconcile: the old flavor, as nova expects after a prep_resize
  or resize_instance failure. After a finish_resize failure nova expects
  the new flavor's allocations although it resets the instance record to
  the old flavor; the reconcile follows the record: the one end state that
  differs from nova's.
* ``_run_periodics``: nova's compute periodics, then the scheduler's
  periodic reconcile (which trims a reverted same-host resize to the old
  flavor).
"""

from nova.compute import instance_actions
from nova import test
from nova.tests.functional import test_servers

from tests.nova.harness import PasteConfigMixin, SchedulerExtMixin


class ServerMovingTestsSchedulerExt(SchedulerExtMixin,
                                    test_servers.ServerMovingTests):

    def _run_periodics(self):
        super()._run_periodics()
        self.reconcile()

    def _resize_to_same_host_and_check_allocations(
            self, server, old_flavor, new_flavor, rp_uuid):
        self.flags(allow_resize_to_same_host=True)
        self._resize_server(server, new_flavor["id"])
        both = self.flavor_resources(old_flavor, new_flavor)
        migration_uuid = self.get_migration_uuid_for_instance(server["id"])
        for _ in range(2):      # before and after the compute periodics
            self.assertRequestMatchesUsage(both, rp_uuid)
            self.assertHolds(server["id"], {rp_uuid: both})
            self.assertHolds(migration_uuid, {})
            self._run_periodics()

    def _test_resize_to_same_host_instance_fails(self, failing_method,
                                                 event_name):
        compute2_service_id = self.admin_api.get_services(
            host=self.compute2.host, binary="nova-compute")[0]["id"]
        self.admin_api.put_service(compute2_service_id, {"status": "disabled"})
        hostname = self.compute1.manager.host
        rp_uuid = self._get_provider_uuid_by_host(hostname)
        server = self._boot_and_check_allocations(self.flavor1, hostname)
        both = self.flavor_resources(self.flavor1, self.flavor2)

        def fake_resize_method(*args, **kwargs):
            self.assertRequestMatchesUsage(both, rp_uuid)
            raise test.TestingException("Simulated resize failure.")

        self.stub_out("nova.compute.manager.ComputeManager.%s" % failing_method,
                      fake_resize_method)
        self.flags(allow_resize_to_same_host=True)
        self.api.post_server_action(
            server["id"], {"resize": {"flavorRef": self.flavor2["id"]}})
        self._wait_for_action_fail_completion(
            server, instance_actions.RESIZE, event_name)
        self.reconcile()
        # nova expects flavor1 after a prep_resize or resize_instance
        # failure; after a finish_resize failure it expects flavor2's
        # allocations although the instance record says flavor1. The
        # reconcile follows the record in every case.
        self.assertFlavorMatchesUsage(rp_uuid, self.flavor1)


class ServerMovingTestsStock(PasteConfigMixin, test_servers.ServerMovingTests):
    """The same tests with nova's own scheduler, for comparison."""
