"""Our manager's HostManager (``host_reads``) in nova 34's functional
harness: the host states of the candidates' hosts, read without every
service row of the cell, equal nova's own. Run by
``test_nova_functional.py`` (testtools, in a subprocess)."""

from unittest import mock

from nova import context as nova_context
from nova import objects
from nova.scheduler import host_manager
from nova.tests.functional import integrated_helpers

from scheduler_ext.nova import host_reads
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
