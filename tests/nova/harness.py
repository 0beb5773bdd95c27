"""Mixins putting scheduler-ext into nova's functional test harness.

Imported only by the ``cases_*`` modules, which run under testtools in a
subprocess (nova's TestCase clears instance attributes after each test,
which pytest's runner does not survive); see ``test_nova_functional.py``.
"""

import os
import site
import sys
import sysconfig

from nova import context as nova_context
import nova.conf

# what a deployment's service start does before any request: import the
# manager (and with it numpy, the engine and the driver). nova's fixtures
# forbid os.uname(), which numpy calls on import, inside a test.
import scheduler_ext.nova.manager  # noqa: F401

MANAGER = "scheduler_ext.nova.manager.SchedulerManager"
CONF = nova.conf.CONF


def api_paste_ini():
    """nova's api-paste.ini: nova's test fixture looks for it under
    site-packages/etc/nova, where a wheel install does not put it (it goes
    to <prefix>/etc/nova)."""
    roots = [sysconfig.get_path("data"), sys.prefix] + site.getsitepackages()
    for root in roots:
        path = os.path.join(root, "etc", "nova", "api-paste.ini")
        if os.path.exists(path):
            return path
    return None


class PasteConfigMixin:
    def setUp(self):
        path = api_paste_ini()
        if path:
            CONF.set_override("api_paste_config", path, group="wsgi")
            self.addCleanup(CONF.clear_override, "api_paste_config",
                            group="wsgi")
        super().setUp()


class SchedulerExtMixin(PasteConfigMixin):
    """Every scheduler service of the test runs scheduler-ext's manager,
    configured exactly as nova's harness configures nova's: our service
    reaches placement through the report client nova builds (which the
    harness points at its placement fixture), nothing else is set."""

    scheduler_manager = MANAGER
    #: False in our own scenario tests that look at the states between a
    #: move's end and its reconcile (they call ``reconcile`` themselves)
    reconcile_loop = True

    def start_service(self, name, host=None, cell_name=None, **kwargs):
        if name == "scheduler" and self.scheduler_manager:
            kwargs.setdefault("manager", self.scheduler_manager)
        svc = super().start_service(name, host=host, cell_name=cell_name,
                                    **kwargs)
        if name == "scheduler" and self.scheduler_manager and \
                not self.reconcile_loop:
            manager = svc.manager
            owner = manager if hasattr(manager, "ext") else manager.driver
            owner.ext.stop_reconcile()
        return svc



class OurCases(SchedulerExtMixin):
    """Helpers of our own nova test cases (never mixed into nova's test
    classes, whose own helpers they could shadow)."""

    def reconcile(self):
        """One reconcile run now (what the service's loop runs); the
        outcome per instance worked on."""
        manager = self.scheduler_service.manager
        owner = manager if hasattr(manager, "reconcile_moves") else manager.driver
        return owner.reconcile_moves(nova_context.get_admin_context())

    def assertReconciled(self, outcomes, *instances):
        """Every instance named was worked on and fully reconciled."""
        for uuid in instances:
            self.assertEqual("done", outcomes.get(uuid), outcomes)
        self.assertNotIn("retry", set(outcomes.values()), outcomes)

    def boot_on(self, flavor_id, host):
        """Boot a server on ``host`` (other hosts may be in use)."""
        req = self._build_server(
            image_uuid="155d900f-4e14-4e4c-a73d-069cbf4541e6",
            flavor_id=flavor_id, networks="none")
        req["availability_zone"] = "nova:%s" % host
        server = self._wait_for_state_change(
            self.api.post_server({"server": req}), "ACTIVE")
        self.assertEqual(host, server["OS-EXT-SRV-ATTR:host"])
        return server

    # -- allocation helpers -------------------------------------------
    def allocations_of(self, consumer):
        """{rp: {rc: n}} held by a consumer (instance or migration)."""
        return {rp: dict(v["resources"]) for rp, v in
                self._get_allocations_by_server_uuid(consumer).items()}

    def flavor_resources(self, *flavors):
        """Per-class maximum of the flavors' resources (one flavor: its
        resources)."""
        out = {}
        for flavor in flavors:
            for rc, n in self._resources_from_flavor(flavor).items():
                out[rc] = max(out.get(rc, 0), n)
        return out

    def assertHolds(self, consumer, expected):
        """The consumer holds exactly ``expected`` ({rp: {rc: n}}; {} for
        nothing)."""
        got = {rp: {rc: n for rc, n in res.items() if n}
               for rp, res in self.allocations_of(consumer).items()}
        self.assertEqual(expected, got)

    def assertUsage(self, rp_uuid, expected):
        usage = self._get_provider_usages(rp_uuid)
        self.assertEqual({rc: expected.get(rc, 0) for rc in usage}, usage)


class Bug1790204Flavors:
    """nova's bug 1790204 flavors: 1 vCPU / 2048 MB / 1028 GB and the same
    with 2 vCPU, resizes to the same host allowed."""

    def _flavors(self):
        self.flags(allow_resize_to_same_host=True)
        body = {"flavor": {"name": "v1r2d1", "ram": 2048, "vcpus": 1,
                           "disk": 1028}}
        flavor1 = self.admin_api.post_flavor(body)
        body["flavor"].update({"name": "v2r2d1", "vcpus": 2})
        return flavor1, self.admin_api.post_flavor(body)
