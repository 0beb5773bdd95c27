"""Mixins putting scheduler-ext into nova's functional test harness.

Imported only by the ``cases_*`` modules, which run under testtools in a
subprocess (nova's TestCase clears instance attributes after each test,
which pytest's runner does not survive); see ``test_nova_functional.py``.
"""

import os
import site
import sys
import sysconfig

from keystoneauth1 import loading as ks_loading
from nova import context as nova_context
import nova.conf

# numpy calls os.uname() when first imported, which nova's test fixtures
# forbid inside a test: import the driver and its engine up front
import scheduler_ext.sources.engine  # noqa: F401
import scheduler_ext.driver  # noqa: F401

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
    """Every scheduler service of the test runs scheduler-ext's manager.

    Our placement client is configured through nova.conf's ``[placement]``
    options only, the way a deployment configures it: keystoneauth's
    ``admin_token`` plugin with the placement fixture's (intercepted)
    endpoint and the ``admin`` token of placement's noauth2 middleware.
    """

    scheduler_manager = MANAGER

    def start_service(self, name, host=None, cell_name=None, **kwargs):
        if name == "scheduler" and self.scheduler_manager:
            kwargs.setdefault("manager", self.scheduler_manager)
            self._point_placement()
        return super().start_service(name, host=host, cell_name=cell_name,
                                     **kwargs)

    def _point_placement(self):
        opts = [o._to_oslo_opt() for o in
                ks_loading.get_plugin_loader("admin_token").get_options()]
        CONF.register_opts(opts, group="placement")
        self.flags(auth_type="admin_token", token="admin", group="placement",
                   endpoint=self.placement.fixture.endpoint)

    def reconcile(self):
        """One run of the scheduler's periodic reconcile task."""
        manager = self.scheduler_service.manager
        owner = manager if hasattr(manager, "reconcile_moves") else manager.driver
        return owner.reconcile_moves(nova_context.get_admin_context())

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
