"""nova's filters and weighers on the mirrored host states' columns, in
nova 34's harness: the columns hold nova's host states after every kind of
change, and a server booted through nova's API lands on a host nova's own
HostManager ranks first over every host (equal weights count), with
nothing ranked on host-state objects. Run by ``test_nova_functional.py``
(testtools, in a subprocess)."""

from unittest import mock

from nova import objects
from nova.scheduler import host_manager

from scheduler_ext.nova import column_ranking, host_columns, ranking
from scheduler_ext.nova.ranking import NovaRanking
from tests.nova.cases_host_state_view import FourComputeHosts


def _row_values(columns: host_columns.HostColumns, row: int) -> tuple:
    return tuple(float(columns.column(name)[row]) for name in host_columns.NUMBERS) + (
        bool(columns.column("disabled")[row]), bool(columns.column("live")[row]))


def _state_values(state) -> tuple:
    return tuple(host_columns.number_of(state, name) for name in host_columns.NUMBERS) + (
        bool(state.service["disabled"]), True)


class RankedOnColumns(FourComputeHosts):
    """The columns follow the cell, and nova's choice is made on them."""

    def setUp(self):
        super().setUp()
        self.flavor = self.api.get_flavors()[0]

    def _everyone(self) -> list[str]:
        return [self._get_provider_uuid_by_host(f"host{i}")
                for i in range(1, 6) if f"host{i}" in self.computes]

    def _assert_columns_are_novas(self):
        """Every live row holds what nova's host state of its node holds."""
        columns, _ = self.ours.view.refreshed_columns(self.ctx, self.ours.enabled_cells)
        novas = {s.uuid: s for s in self.nova.get_host_states_by_uuids(
            self.ctx, self._everyone(), None)}
        live = {u: r for u, r in columns.row_by_uuid.items()
                if columns.column("live")[r]}
        self.assertEqual(sorted(novas), sorted(live))
        for uuid, state in novas.items():
            self.assertEqual(_state_values(state), _row_values(columns, live[uuid]), uuid)

    def _novas_best(self, flavor_id: str) -> tuple[set[str], list[str]]:
        """(the hosts nova's own HostManager weighs first over every host,
        the hosts it keeps)."""
        flavor = objects.Flavor.get_by_flavor_id(self.ctx, flavor_id)
        spec = objects.RequestSpec(
            flavor=flavor, image=objects.ImageMeta(properties=objects.ImageMetaProps()),
            instance_group=None, scheduler_hints={}, ignore_hosts=None,
            force_hosts=None, force_nodes=None, requested_destination=None,
            project_id=self.api.project_id, instance_uuid="00000000-0000-0000-0000-000000000001")
        nova = host_manager.HostManager()      # with the aggregates as they are now
        states = list(nova.get_host_states_by_uuids(self.ctx, self._everyone(), spec))
        kept = list(nova.get_filtered_hosts(states, spec))
        weighed = nova.get_weighed_hosts(kept, spec)
        top = weighed[0].weight
        return {w.obj.host for w in weighed if w.weight == top}, sorted(h.host for h in kept)

    def _boot_where_nova_would(self, flavor_id: str) -> str:
        best, _ = self._novas_best(flavor_id)
        with mock.patch.object(NovaRanking, "rank_on_objects",
                               side_effect=AssertionError("ranked on objects")):
            server = self._create_server(flavor_id=flavor_id, networks="none")
        host = server["OS-EXT-SRV-ATTR:host"]
        self.assertIn(host, best)
        return host

    def test_columns_hold_novas_host_states_after_each_change(self):
        self._assert_columns_are_novas()
        service = self.admin_api.get_services(host="host4", binary="nova-compute")[0]
        self.admin_api.put_service(service["id"], {"status": "disabled"})
        self._assert_columns_are_novas()
        self._create_server(networks="none", host="host2")
        self.computes["host2"].manager.update_available_resource(self.ctx)
        self._assert_columns_are_novas()
        self.computes["host3"].stop()
        service = self.admin_api.get_services(host="host3", binary="nova-compute")[0]
        self.admin_api.api_delete(f"/os-services/{service['id']}")
        del self.computes["host3"]
        self._assert_columns_are_novas()
        self._start_compute(host="host5")
        self._assert_columns_are_novas()

    def test_boots_land_where_novas_code_ranks_first(self):
        flavor_id = self.flavor["id"]
        for _ in range(6):
            host = self._boot_where_nova_would(flavor_id)
            self.computes[host].manager.update_available_resource(self.ctx)

    def test_boots_land_where_novas_code_ranks_first_placing_one_host_at_first(self):
        """The order made for the best host only, the others placed when
        read (``ColumnWeights``), as on a large fleet."""
        with mock.patch.object(ranking, "HEAD_HOSTS", 1), \
                mock.patch.object(ranking, "ColumnWeights",
                                  wraps=ranking.ColumnWeights) as placed_when_read:
            for _ in range(4):
                host = self._boot_where_nova_would(self.flavor["id"])
                self.computes[host].manager.update_available_resource(self.ctx)
        self.assertGreaterEqual(placed_when_read.call_count, 4)

    def test_a_disabled_host_is_filtered_and_an_aggregate_multiplier_packs(self):
        service = self.admin_api.get_services(host="host1", binary="nova-compute")[0]
        self.admin_api.put_service(service["id"], {"status": "disabled"})
        _, kept = self._novas_best(self.flavor["id"])
        self.assertEqual(["host2", "host3", "host4"], kept)
        # hosts 2 and 3 pack by RAM (a negative multiplier), host 4 spreads
        agg = self.admin_api.post_aggregate({"aggregate": {"name": "pack"}})
        for host in ("host2", "host3"):
            self.admin_api.add_host_to_aggregate(agg["id"], host)
        self.admin_api.post_aggregate_action(agg["id"], {"set_metadata": {
            "metadata": {"ram_weight_multiplier": "-1.0"}}})
        for _ in range(4):
            host = self._boot_where_nova_would(self.flavor["id"])
            self.assertNotEqual("host1", host)
            self.computes[host].manager.update_available_resource(self.ctx)

    def test_the_plan_takes_novas_default_filters_and_weighers(self):
        spec = objects.RequestSpec(
            flavor=objects.Flavor(extra_specs={}), image=None, instance_group=None,
            scheduler_hints={}, ignore_hosts=None, force_hosts=None, force_nodes=None,
            requested_destination=None)
        self.assertIsNotNone(column_ranking.ColumnRanking.planned(self.ours, spec))
