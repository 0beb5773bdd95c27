"""The over-hold window, measured in nova 34's functional harness.

One MediumFakeDriver host, same-host resizes allowed, scheduler-ext's
service running its reconcile loop as a deployment does (default
``reconcile_interval``, no notifications: the harness emits them to its
fake notifier only, so the migration poll alone drives the loop). For a
same-host confirm that shrinks a class, a same-host revert and a failed
same-host resize (prep_resize fails), each ``ROUNDS`` times: the window is
from nova's end of the move (the ``updated_at`` nova's compute gives the
migration when it sets ``confirmed``, ``reverted`` or ``error``) until
placement holds exactly the live flavor for the server (polled every
``POLL`` seconds). The figures go to the file named by
``SCHEDULER_EXT_WINDOW_FILE`` (one JSON object a line) for
``test_nova_functional`` to report; the tests assert that placement does
get there, never how fast.
"""

import datetime
import json
import os
import time

from nova.compute import instance_actions
from nova import context as nova_context
from nova import objects
from nova import test
from nova.tests.functional import integrated_helpers

from tests.nova.harness import OurCases

ROUNDS = int(os.environ.get("SCHEDULER_EXT_WINDOW_ROUNDS", "5"))
POLL = 0.05
#: a liveness bound, not a speed assertion
DEADLINE = 120.0


class OverHoldWindow(OurCases,
                     integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = "fake.MediumFakeDriver"

    def setUp(self):
        super().setUp()
        self.compute1 = self._start_compute(host="host1")
        self.rp = self._get_provider_uuid_by_host("host1")
        self.flags(allow_resize_to_same_host=True)
        self.small = self._create_flavor(name="small", vcpu=1,
                                         memory_mb=1024, disk=10, ephemeral=0)
        # more vCPU, less memory than small: every move end over-holds
        self.other = self._create_flavor(name="other", vcpu=2,
                                         memory_mb=512, disk=10, ephemeral=0)

    def _allocs(self, server_id):
        return {rp: dict(v["resources"]) for rp, v in
                self._get_allocations_by_server_uuid(server_id).items()}

    def _wait_exact(self, server_id, flavor_id, migration_uuid, kind):
        want = {self.rp: self._resources_from_flavor(
            self.api.get_flavor(flavor_id))}
        start = time.monotonic()
        while self._allocs(server_id) != want:
            self.assertLess(time.monotonic() - start, DEADLINE,
                            f"{kind}: placement still holds "
                            f"{self._allocs(server_id)}, want {want}")
            time.sleep(POLL)
        fixed = datetime.datetime.utcnow()
        ctxt = nova_context.get_admin_context()
        mig = objects.Migration.get_by_uuid(ctxt, migration_uuid)
        ended = mig.updated_at.replace(tzinfo=None)
        seconds = max(0.0, (fixed - ended).total_seconds())
        path = os.environ.get("SCHEDULER_EXT_WINDOW_FILE")
        if path:
            with open(path, "a") as out:
                out.write(json.dumps({"kind": kind, "seconds": seconds,
                                      "status": mig.status}) + "\n")
        self.assertHolds(server_id, want)
        return seconds

    def _boot(self):
        return self._boot_and_check_allocations(
            self.api.get_flavor(self.small), "host1")

    def test_same_host_confirm_that_shrinks_a_class(self):
        for _ in range(ROUNDS):
            server = self._boot()
            server = self._resize_server(server, self.other)
            mig = self.get_migration_uuid_for_instance(server["id"])
            self._confirm_resize(server)
            self._wait_exact(server["id"], self.other, mig, "confirm")
            self._delete_and_check_allocations(server)

    def test_same_host_revert(self):
        for _ in range(ROUNDS):
            server = self._boot()
            server = self._resize_server(server, self.other)
            mig = self.get_migration_uuid_for_instance(server["id"])
            self._revert_resize(server)
            self._wait_exact(server["id"], self.small, mig, "revert")
            self._delete_and_check_allocations(server)

    def test_failed_same_host_resize(self):
        def fails(*args, **kwargs):
            raise test.TestingException("prep_resize fails")

        self.stub_out("nova.compute.manager.ComputeManager._prep_resize",
                      fails)
        for _ in range(ROUNDS):
            server = self._boot()
            self.api.post_server_action(
                server["id"], {"resize": {"flavorRef": self.other}})
            self._wait_for_action_fail_completion(
                server, instance_actions.RESIZE, "compute_prep_resize")
            server = self._wait_for_state_change(server, "ERROR")
            mig = self.get_migration_uuid_for_instance(server["id"])
            self._wait_exact(server["id"], self.small, mig, "failure")
            self._delete_and_check_allocations(server)
