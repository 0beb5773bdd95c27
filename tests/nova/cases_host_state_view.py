"""Our reads of nova's databases, in nova 34's harness: our manager's
HostManager (``host_state_view``) gives the host states nova's own gives,
from a mirror of the cell's rows refreshed by what changed; a move's
Migration record (``migrations``) is the one nova's objects give.
Run by ``test_nova_functional.py`` (testtools, in a subprocess)."""

import datetime
import random

import fixtures
from unittest import mock
import uuid

from nova import context as nova_context
from nova import objects
from nova.db.main import api as main_db
from nova.scheduler import host_manager
from nova.scheduler import request_filter
from nova import test
from nova.tests.functional import integrated_helpers
from oslo_utils import timeutils
from oslo_utils.fixture import uuidsentinel as uuids

from scheduler_ext.nova import compute_version, host_state_view, migrations
from scheduler_ext.nova.request import MOVE_TYPES
from tests.nova.harness import OurCases

#: nova's function, taken as this module is imported (before any test's
#: fixture or scheduler replaces it)
NOVAS_MINIMUM_VERSION = objects.service.get_minimum_version_all_cells


def _described(states) -> list:
    """What nova's filters and weighers read of each host state."""
    return sorted((s.host, s.nodename, s.uuid, s.cell_uuid, dict(s.service),
                   s.free_ram_mb, s.total_usable_ram_mb, s.vcpus_total, s.vcpus_used,
                   s.free_disk_mb, s.disk_mb_used, s.num_instances, s.num_io_ops,
                   s.hypervisor_type, s.hypervisor_version, s.cpu_allocation_ratio,
                   s.ram_allocation_ratio, s.disk_allocation_ratio, s.updated,
                   sorted(a.id for a in s.aggregates), sorted(s.instances))
                  for s in states)


class FourComputeHosts(OurCases, integrated_helpers.ProviderUsageBaseTestCase):
    """Four compute hosts (host1 to host4), our scheduler manager's host
    manager (``ours``) and one of nova's own (``nova``)."""

    compute_driver = "fake.MediumFakeDriver"

    def setUp(self):
        super().setUp()
        for i in range(1, 5):
            self._start_compute(host=f"host{i}")
        self.ctx = nova_context.get_admin_context()
        self.ours = self.scheduler_service.manager.host_manager
        self.nova = host_manager.HostManager()


class MirroredHostStates(FourComputeHosts):
    """Our manager's HostManager gives nova's host states after every kind
    of change to the cell's rows, reading only the changed rows."""

    def _uuids(self, *hosts):
        return [self._get_provider_uuid_by_host(h) for h in hosts]

    def _assert_same(self, uuids):
        got = _described(self.ours.get_host_states_by_uuids(self.ctx, uuids, None))
        expected = _described(self.nova.get_host_states_by_uuids(self.ctx, uuids, None))
        self.assertEqual(expected, got)
        return got

    def test_same_host_states_as_novas_after_each_change(self):
        self.assertIsInstance(self.ours, host_state_view.MirroredHostManager)
        everyone = self._uuids("host1", "host2", "host3", "host4")
        self.assertEqual(4, len(self._assert_same(everyone)))
        # a service disabled (an operator's action)
        service = self.admin_api.get_services(host="host4", binary="nova-compute")[0]
        self.admin_api.put_service(service["id"], {"status": "disabled"})
        got = self._assert_same(everyone)
        self.assertTrue(got[3][4]["disabled"])
        # a compute node's usage reported (a server booted on host2)
        server = self._create_server(networks="none", host="host2")
        self.computes["host2"].manager.update_available_resource(self.ctx)
        got = self._assert_same(everyone)
        self.assertIn(server["id"], got[1][-1])
        # a compute node gone: its service deleted with it
        self.computes["host3"].stop()
        service = self.admin_api.get_services(host="host3", binary="nova-compute")[0]
        self.admin_api.api_delete(f"/os-services/{service['id']}")
        got = self._assert_same(everyone)
        self.assertEqual(["host1", "host2", "host4"], [g[0] for g in got])
        # a new compute host
        self._start_compute(host="host5")
        self.assertEqual(4, len(self._assert_same(everyone + self._uuids("host5"))))
        # a host's aggregate, held in nova's memory, read per request
        agg = objects.Aggregate(self.ctx, name="agg1")
        agg.create()
        agg.add_host("host1")
        self.ours.update_aggregates([agg])
        self.nova.update_aggregates([agg])
        got = self._assert_same(self._uuids("host1"))
        self.assertEqual([agg.id], got[0][-2])

    def test_host_state_refresh_interval_reuses_the_mirror_until_it_passes(self):
        everyone = self._uuids("host1", "host2", "host3", "host4")
        self._assert_same(everyone)
        self.ours.view.refresh_interval = 3600.0
        service = self.admin_api.get_services(host="host2", binary="nova-compute")[0]
        self.admin_api.put_service(service["id"], {"status": "disabled"})
        stale = _described(self.ours.get_host_states_by_uuids(self.ctx, everyone, None))
        self.assertFalse(stale[1][4]["disabled"])       # not asked yet
        self.ours.view.refresh_interval = 0.0
        self.assertTrue(self._assert_same(everyone)[1][4]["disabled"])

    def test_a_clock_gone_back_reads_the_cell_whole(self):
        everyone = self._uuids("host1", "host2", "host3", "host4")
        timeutils.set_time_override(timeutils.utcnow() + datetime.timedelta(hours=1))
        try:
            self._assert_same(everyone)     # refreshed "an hour from now"
        finally:
            timeutils.clear_time_override()
        service = self.admin_api.get_services(host="host3", binary="nova-compute")[0]
        self.admin_api.put_service(service["id"], {"status": "disabled"})
        self.assertTrue(self._assert_same(everyone)[2][4]["disabled"])

    def test_a_refresh_takes_only_the_rows_that_changed(self):
        everyone = self._uuids("host1", "host2", "host3", "host4")
        self._assert_same(everyone)
        service = self.admin_api.get_services(host="host2", binary="nova-compute")[0]
        self.admin_api.put_service(service["id"], {"status": "disabled"})
        mirror = host_state_view.CellMirror
        taken: dict[str, list] = {"services": [], "nodes": []}

        def recording(kind, take):
            def record(self, context, rows):
                taken[kind].append([r["host"] for r in rows])
                return take(self, context, rows)
            return record
        with mock.patch.object(mirror, "_take_services",
                               recording("services", mirror._take_services)), \
                mock.patch.object(mirror, "_take_nodes",
                                  recording("nodes", mirror._take_nodes)):
            self._assert_same(everyone)
        self.assertEqual({"services": [["host2"]], "nodes": []}, taken)

    def test_an_early_read_reads_the_compute_nodes_beside_the_services(self):
        """The compute node rows are read while the service rows are: each
        read waits (up to 10 s) for the other to start."""
        import threading
        self._start_compute(host="host5")
        started = {"compute_nodes": threading.Event(), "services": threading.Event()}
        real = host_state_view._changed_rows
        seen = []

        def read(context, table, since, where=None):
            started[table.name].set()
            other = "services" if table.name == "compute_nodes" else "compute_nodes"
            seen.append(started[other].wait(10))
            return real(context, table, since, where)
        arrived = timeutils.utcnow()
        with mock.patch.object(host_state_view, "_changed_rows", read):
            self.assertTrue(self.ours.view.refresh_cells(self.ctx, self.ours.enabled_cells))
        self.assertEqual([True, True], seen)
        columns, _ = self.ours.view.refreshed_columns(self.ctx, self.ours.enabled_cells,
                                                      arrived)     # not read again
        self.assertIn(self._uuids("host5")[0], columns.row_by_uuid)

    def test_a_cell_refreshed_since_the_request_arrived_is_not_read_again(self):
        everyone = self._uuids("host1", "host2", "host3", "host4")
        arrived = timeutils.utcnow()
        self.ours.view.refresh_cells(self.ctx, self.ours.enabled_cells)    # the early read
        reads = []
        real = host_state_view._changed_rows

        def counted(*args, **kwargs):
            reads.append(args[1].name)
            return real(*args, **kwargs)
        with mock.patch.object(host_state_view, "_changed_rows", counted):
            self.ours.get_host_states_by_uuids(self.ctx, everyone, None, since=arrived)
            self.assertEqual([], reads)
            self.ours.get_host_states_by_uuids(self.ctx, everyone, None)
        self.assertEqual(["services", "compute_nodes"], reads)


class MinimumComputeVersion(OurCases, integrated_helpers.ProviderUsageBaseTestCase):
    """nova's request filters' minimum ``nova-compute`` version across the
    cells (``compute_version``), answered from the host states' mirror:
    the answer of nova's own ``get_minimum_version_all_cells``, and no cell
    asked during a call."""

    NUMBER_OF_CELLS = 2
    compute_driver = "fake.MediumFakeDriver"

    def setUp(self):
        super().setUp()
        # nova's own answer, not the harness' AllServicesCurrent fixture's
        # (which ``install`` wrapped as the scheduler started)
        self.assertEqual("nova.objects.service", NOVAS_MINIMUM_VERSION.__module__)
        self.useFixture(fixtures.MonkeyPatch(
            "nova.objects.service.get_minimum_version_all_cells", NOVAS_MINIMUM_VERSION))
        compute_version.install()
        self._start_compute(host="host1")
        self._start_compute(host="host2")
        self._start_compute(host="host3", cell_name="cell2")
        self.ctx = nova_context.get_admin_context()
        self.ours = self.scheduler_service.manager.host_manager
        self.cells = list(self.ours.cells.values())

    def _service_rows(self):
        """(cell mapping, service id) of each nova-compute service."""
        out = []
        for cell in self.cells:
            with nova_context.target_cell(self.ctx, cell) as cctxt:
                out += [(cell, s.id) for s in objects.ServiceList.get_by_binary(
                    cctxt, "nova-compute")]
        return out

    def test_same_minimum_version_as_novas_after_random_changes(self):
        rng = random.Random(7)
        rows = self._service_rows()
        self.assertEqual(3, len(rows))
        seen = set()

        def ours():
            """The version a request's early read hands on."""
            answers = []
            self.assertTrue(self.ours.view.refresh_cells(self.ctx, self.cells,
                                                         answers.append))
            return answers[0]
        for _ in range(40):
            cell, service_id = rng.choice(rows)
            change = rng.choice([
                {"version": rng.choice([0, 1, 60, 72, 73, 80, None])},
                {"forced_down": rng.random() < 0.5}])
            with nova_context.target_cell(self.ctx, cell) as cctxt:
                main_db.service_update(cctxt, service_id, change)
            novas = NOVAS_MINIMUM_VERSION(self.ctx, ["nova-compute"])
            self.assertEqual(novas, ours())
            seen.add(novas)
        self.assertGreater(len(seen), 3)        # the draws moved the answer
        # a service deleted takes its version with it
        cell, service_id = rows[0]
        with nova_context.target_cell(self.ctx, cell) as cctxt:
            main_db.service_update(cctxt, service_id, {"version": 1, "forced_down": False})
            main_db.service_destroy(cctxt, service_id)
        self.assertEqual(NOVAS_MINIMUM_VERSION(self.ctx, ["nova-compute"]), ours())

    def _boot_counting_cell_reads(self):
        """Boot a server through nova's API; (how many times nova's owner
        filter asked a cell for its minimum service version, what the
        filter gave). nova's API asks too, for its own checks: not counted."""
        asked, owner, in_filter = [], [], []
        read = objects.Service._db_service_get_minimum_version
        owner_filter = request_filter.owner_nova_filter

        def counted(*args, **kwargs):
            if in_filter:
                asked.append(args)
            return read(*args, **kwargs)

        def recorded(*args, **kwargs):
            in_filter.append(True)
            try:
                owner.append(owner_filter(*args, **kwargs))
            finally:
                in_filter.pop()
            return owner[-1]
        with mock.patch.object(objects.Service, "_db_service_get_minimum_version",
                               counted), \
                mock.patch.object(request_filter, "ALL_REQUEST_FILTERS", [
                    recorded if f is owner_filter else f
                    for f in request_filter.ALL_REQUEST_FILTERS]):
            server = self._create_server(networks="none")
        self.assertEqual("ACTIVE", server["status"])
        return len(asked), owner

    def test_a_boot_asks_no_cell_for_the_minimum_version(self):
        asked, owner = self._boot_counting_cell_reads()
        self.assertEqual(0, asked)
        self.assertEqual([True], owner)     # every compute is new enough

    def test_a_cell_that_did_not_answer_the_refresh_is_asked_by_nova(self):
        take = host_state_view.CellMirror.take_services
        cell2 = self.ours.cells[uuids.cell2]

        def cell2_down(mirror, context):
            if mirror.cell_uuid == cell2.uuid:
                raise RuntimeError("cell2's database went away")
            return take(mirror, context)
        with mock.patch.object(host_state_view.CellMirror, "take_services", cell2_down):
            asked, owner = self._boot_counting_cell_reads()
        self.assertGreater(asked, 0)
        self.assertEqual([True], owner)


class PendingMigrationRead(test.TestCase):
    """``migrations.pending_migration`` gives the record nova's own objects
    give for the rule it replaced: the newest not deleted ``pre-migrating``
    resize or cold migration of the instance."""

    TYPES = ("resize", "migration", "live-migration", "evacuation")
    STATUSES = ("pre-migrating", "migrating", "finished", "error", "confirmed")

    def setUp(self):
        super().setUp()
        self.ctx = nova_context.get_admin_context()

    def _migration(self, instance, status, kind, deleted=False):
        m = objects.Migration(
            self.ctx, instance_uuid=instance, uuid=str(uuid.uuid4()),
            status=status, migration_type=kind, source_compute=f"src-{kind}",
            source_node=f"node-{status}")
        m.create()
        if deleted:     # soft-deleted, as deleting its instance leaves it
            m.deleted = True
            m.save()
        return m

    def _nova_rule(self, instance):
        found = [m for m in objects.MigrationList.get_by_filters(
            self.ctx, {"instance_uuid": instance, "status": "pre-migrating"})
            if m.migration_type in MOVE_TYPES]
        return max(found, key=lambda m: m.id) if found else None

    def test_none_without_a_pending_move(self):
        instance = str(uuid.uuid4())
        self.assertIsNone(migrations.pending_migration(self.ctx, instance, MOVE_TYPES))
        self._migration(instance, "pre-migrating", "live-migration")
        self._migration(instance, "migrating", "resize")
        self._migration(instance, "pre-migrating", "resize", deleted=True)
        self.assertIsNone(migrations.pending_migration(self.ctx, instance, MOVE_TYPES))

    def test_newest_pending_move_of_the_instance(self):
        instance, other = str(uuid.uuid4()), str(uuid.uuid4())
        self._migration(instance, "pre-migrating", "resize")
        newest = self._migration(instance, "pre-migrating", "migration")
        self._migration(other, "pre-migrating", "resize")
        got = migrations.pending_migration(self.ctx, instance, MOVE_TYPES)
        self.assertEqual((newest.uuid, "src-migration", "node-pre-migrating"),
                         tuple(got))

    def test_same_record_as_nova_objects_on_random_histories(self):
        rng = random.Random(1790204)
        instances = [str(uuid.uuid4()) for _ in range(12)]
        for _ in range(120):
            self._migration(rng.choice(instances), rng.choice(self.STATUSES),
                            rng.choice(self.TYPES), deleted=rng.random() < 0.2)
        for instance in instances + [str(uuid.uuid4())]:
            expected = self._nova_rule(instance)
            got = migrations.pending_migration(self.ctx, instance, MOVE_TYPES)
            self.assertEqual(
                None if expected is None else
                (expected.uuid, expected.source_compute, expected.source_node),
                None if got is None else tuple(got))
