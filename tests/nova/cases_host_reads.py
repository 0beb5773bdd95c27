"""Our reads of nova's databases, in nova 34's harness: our manager's
HostManager (``host_reads``) builds the host states of the candidates'
hosts, read without every service row of the cell, equal to nova's own;
a move's Migration record (``migrations``) is the one nova's objects give.
Run by ``test_nova_functional.py`` (testtools, in a subprocess)."""

import random
from unittest import mock
import uuid

from nova import context as nova_context
from nova import objects
from nova.scheduler import host_manager
from nova import test
from nova.tests.functional import integrated_helpers

from scheduler_ext.nova import host_reads, migrations
from scheduler_ext.nova.request import MOVE_TYPES
from tests.nova.harness import OurCases


class ServiceScopedHostStates(OurCases,
                              integrated_helpers.ProviderUsageBaseTestCase):
    """Our manager's HostManager reads the nova-compute service rows of the
    candidates' hosts only, and builds the same host states as nova's."""

    compute_driver = "fake.MediumFakeDriver"

    def setUp(self):
        super().setUp()
        for i in range(1, 5):
            self._start_compute(host=f"host{i}")
        self.admin_api.put_service(
            self.admin_api.get_services(host="host4", binary="nova-compute")[0]["id"],
            {"status": "disabled"})

    def test_same_host_states_without_reading_every_service(self):
        ctx = nova_context.get_admin_context()
        ours = self.scheduler_service.manager.host_manager
        self.assertIsInstance(ours, host_reads.ServiceScopedHostManager)
        wanted = [self._get_provider_uuid_by_host(h) for h in ("host2", "host4")]
        read_all = mock.patch.object(objects.ServiceList, "get_by_binary",
                                     wraps=objects.ServiceList.get_by_binary)
        with read_all as every_service:
            got = ours.get_host_states_by_uuids(ctx, wanted, None)
            self.assertEqual(0, every_service.call_count)
            expected = host_manager.HostManager().get_host_states_by_uuids(
                ctx, wanted, None)
            self.assertEqual(1, every_service.call_count)

        def described(states):
            return sorted((s.host, s.nodename, s.uuid, s.cell_uuid,
                           dict(s.service), s.free_ram_mb, s.vcpus_total,
                           s.free_disk_mb, sorted(s.instances))
                          for s in states)
        got, expected = described(got), described(expected)
        self.assertEqual(expected, got)
        self.assertEqual(["host2", "host4"], [g[0] for g in got])
        self.assertTrue(got[1][4]["disabled"])


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
