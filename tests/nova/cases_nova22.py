"""The nova <= 22 driver contract, exercised inside nova 34's harness.

nova 22 (Victoria) does not import on Python 3.11, so two stand-ins model
what the contract needs from it, and nothing else:

* ``nova.scheduler.driver.Scheduler``: 22.x's abstract driver base class
  (``USES_ALLOCATION_CANDIDATES = True`` unless a driver says otherwise; the
  constructor takes no argument and sets ``host_manager`` and
  ``servicegroup_api``; ``select_destinations(context, spec_obj,
  instance_uuids, alloc_reqs_by_rp_uuid, provider_summaries,
  allocation_request_version=None, return_alternates=False)`` is abstract);
* ``VictoriaManager``: how 22.x's scheduler manager uses a driver: loaded
  by name from the ``nova.scheduler.driver`` entry-point namespace, built
  without arguments; when the driver does not use allocation candidates the
  manager asks placement nothing and passes None for the candidates and the
  provider summaries; Selections are returned as they come (legacy dicts
  when the caller does not take objects).

Everything else (RequestSpec, HostManager, filters, weighers, conductor,
computes, placement) is nova 34's.
"""

import abc
import sys
import types

from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids
from stevedore import driver as sd_driver

from nova import objects
from nova.scheduler import host_manager
from nova.scheduler import manager as nova_manager
import nova.scheduler
from nova import servicegroup
from nova.tests.functional.regressions import test_bug_1790204

from tests.nova.harness import Bug1790204Flavors, OurCases


def install_standin_base():
    """Make ``nova.scheduler.driver`` the 22.x base class stand-in (nova 34
    has no such module)."""
    existing = sys.modules.get("nova.scheduler.driver")
    if existing is not None:
        return existing
    module = types.ModuleType("nova.scheduler.driver")

    class Scheduler(metaclass=abc.ABCMeta):
        """Stand-in of nova 22.x's scheduler driver base class."""

        USES_ALLOCATION_CANDIDATES = True

        def __init__(self):
            self.host_manager = host_manager.HostManager()
            self.servicegroup_api = servicegroup.API()

        def hosts_up(self, context, topic):
            services = objects.ServiceList.get_by_topic(context, topic)
            return [s.host for s in services
                    if self.servicegroup_api.service_is_up(s)]

        @abc.abstractmethod
        def select_destinations(self, context, spec_obj, instance_uuids,
                                alloc_reqs_by_rp_uuid, provider_summaries,
                                allocation_request_version=None,
                                return_alternates=False):
            """Per instance: [chosen Selection, alternates...]."""

    module.Scheduler = Scheduler
    sys.modules["nova.scheduler.driver"] = module
    nova.scheduler.driver = module
    return module


STANDIN = install_standin_base()

from scheduler_ext.nova import driver as ext_driver  # noqa: E402


class VictoriaManager(nova_manager.SchedulerManager):
    """Stand-in of nova 22.x's manager <-> driver contract."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.driver = sd_driver.DriverManager(
            "nova.scheduler.driver", "scheduler_ext",
            invoke_on_load=True).driver

    def select_destinations(self, ctxt, request_spec=None,
                            filter_properties=None,
                            spec_obj=nova_manager.SchedulerManager._sentinel,
                            instance_uuids=None, return_objects=False,
                            return_alternates=False):
        if spec_obj is self._sentinel:
            spec_obj = objects.RequestSpec.from_primitives(
                ctxt, request_spec, filter_properties)
        assert not self.driver.USES_ALLOCATION_CANDIDATES, \
            "the stand-in models drivers with their own candidates only"
        selections = self.driver.select_destinations(
            ctxt, spec_obj, instance_uuids, None, None, None,
            return_alternates and return_objects)
        if not return_objects:
            return jsonutils.to_primitive([s[0].to_dict() for s in selections])
        return selections


class Nova22Contract(OurCases, Bug1790204Flavors,
                     test_bug_1790204.ResizeSameHostDoubledAllocations):
    """nova's bug 1790204 scenario through the 22.x contract."""

    scheduler_manager = "tests.nova.cases_nova22.VictoriaManager"
    reconcile_loop = False

    def test_entry_point_and_class_contract(self):
        drv = self.scheduler_service.manager.driver
        self.assertIsInstance(drv, ext_driver.SchedulerExtDriver)
        self.assertIsInstance(drv, STANDIN.Scheduler)
        self.assertFalse(drv.USES_ALLOCATION_CANDIDATES)
        self.assertIs(drv.host_manager.__class__, host_manager.HostManager)

    def test_resize_same_host_full_allocations(self):
        flavor1, flavor2 = self._flavors()
        rp = self._get_provider_uuid_by_host(uuids.host)
        server = self._boot_and_check_allocations(flavor1, uuids.host)
        server = self._resize_server(server, flavor2["id"])
        self.assertEqual("VERIFY_RESIZE", server["status"])
        migration = self.get_migration_uuid_for_instance(server["id"])
        self.assertHolds(server["id"],
                         {rp: self.flavor_resources(flavor1, flavor2)})
        self.assertHolds(migration, {})
        self._revert_resize(server)
        outcomes = self.scheduler_service.manager.driver.reconcile_moves(
            self._context())
        self.assertReconciled(outcomes, server["id"])
        self.assertHolds(server["id"], {rp: self.flavor_resources(flavor1)})
        self.assertHolds(migration, {})
        server = self._resize_server(server, flavor2["id"])
        self._confirm_resize(server)
        self.assertHolds(server["id"], {rp: self.flavor_resources(flavor2)})
        self._delete_and_check_allocations(server)

    def test_requests_it_does_not_model_go_to_filter_scheduler(self):
        """A rebuild goes to 22.x's FilterScheduler (stand-in) with no
        candidates, as 22.x's manager would have called it."""
        calls = []

        class FilterScheduler:
            placement_client = None

            def select_destinations(self, *args):
                calls.append(args)
                return [["stock"]]

        module = types.ModuleType("nova.scheduler.filter_scheduler")
        module.FilterScheduler = FilterScheduler
        sys.modules["nova.scheduler.filter_scheduler"] = module
        self.addCleanup(sys.modules.pop, "nova.scheduler.filter_scheduler",
                        None)
        drv = self.scheduler_service.manager.driver
        spec = objects.RequestSpec(
            scheduler_hints={"_nova_check_type": ["rebuild"]})
        ctxt = self._context()
        self.assertEqual([["stock"]], drv.select_destinations(
            ctxt, spec, [uuids.instance], None, None, None, True))
        self.assertEqual([(ctxt, spec, [uuids.instance], None, None, None,
                           True)], calls)

    @staticmethod
    def _context():
        from nova import context
        return context.get_admin_context()
