"""Unit tests of ``scheduler_ext.nova`` (request translation, reconcile
guard and window) against nova 34's objects (no services). Run with the other ``cases_*`` modules, in a subprocess, so
that nova is never imported into pytest's process."""

import contextlib
import types
import unittest
from unittest import mock
import uuid

from nova import objects

from scheduler_ext.nova import migrations
from scheduler_ext.nova import reconcile as nova_reconcile
from scheduler_ext.nova import request as nova_request
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.moves.reconcile import InstanceState, MoveState, Reconciler
from scheduler_ext.sources.base import Candidate

objects.register_all()

NOVA_QUERY = ("limit=1000&resources=DISK_GB%3A1%2CMEMORY_MB%3A512%2CVCPU%3A1"
              "&root_required=%21COMPUTE_STATUS_DISABLED%2COWNER_NOVA")


class ParseQuery(unittest.TestCase):

    def test_nova_boot_query(self):
        f = nova_request.parse_query(NOVA_QUERY)
        self.assertEqual({"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1},
                         f.resources)
        self.assertEqual(1000, f.limit)
        self.assertEqual({"OWNER_NOVA"}, f.root_required)
        self.assertEqual({"COMPUTE_STATUS_DISABLED"}, f.root_forbidden)

    def test_traits_aggregates_tree(self):
        a, b, c = (str(uuid.uuid4()) for _ in range(3))
        # nova asks at microversion 1.36: one required, no in: form
        f = nova_request.parse_query(
            f"resources=VCPU:2&required=HW_CPU_X86_AVX,!CUSTOM_SLOW"
            f"&member_of=in:{a},{b}"
            f"&member_of={c}&member_of=!in:{a}&in_tree={c}")
        self.assertEqual({"HW_CPU_X86_AVX"}, f.required)
        self.assertEqual({"CUSTOM_SLOW"}, f.forbidden)
        self.assertEqual((), f.required_any)
        self.assertEqual((frozenset({a, b}), frozenset({c})), f.member_of)
        self.assertEqual({a}, f.forbidden_aggregates)
        self.assertEqual(c, f.in_tree)
        self.assertIsNone(f.limit)

    def test_what_placement_refuses_goes_to_nova(self):
        for query in ("resources=VCPU:1&resources1=VGPU:1&resources2=VGPU:1",
                      "resources=VCPU:1&same_subtree=_a,_b",
                      "resources=VCPU:1&root_required=in:CUSTOM_A,CUSTOM_B",
                      # placement 1.36 refuses in: in required
                      "resources=VCPU:1&required=in:CUSTOM_A,CUSTOM_B",
                      "required=CUSTOM_X"):
            with self.assertRaises(nova_request.UseNova, msg=query):
                nova_request.parse_query(query)

    def test_granular_groups_are_ours(self):
        port = str(uuid.uuid4())
        f = nova_request.parse_query(
            f"resources=VCPU:1&resources{port}=NET_BW_EGR_KILOBIT_PER_SEC:1000"
            f"&required{port}=CUSTOM_PHYSNET_NET0&resources_GPU=VGPU:1"
            "&group_policy=isolate&same_subtree=_GPU")
        self.assertEqual([port, "_GPU"], [g.suffix for g in f.granular])
        self.assertEqual({"CUSTOM_PHYSNET_NET0"}, f.granular[0].required)
        self.assertTrue(f.isolate)

    def test_repeated_required_keeps_the_last_as_at_1_36(self):
        f = nova_request.parse_query(
            "resources=VCPU:1&required=CUSTOM_A&required=CUSTOM_B")
        self.assertEqual({"CUSTOM_B"}, f.required)

    def test_group_policy_alone_changes_nothing(self):
        # with only the unsuffixed group placement ignores group_policy
        f = nova_request.parse_query("resources=VCPU:1&group_policy=none")
        self.assertEqual({"VCPU": 1}, f.resources)

    def test_from_a_request_spec(self):
        flavor = objects.Flavor(vcpus=2, memory_mb=1024, root_gb=10,
                                ephemeral_gb=5, swap=512,
                                extra_specs={"trait:CUSTOM_FAST": "required"})
        spec = objects.RequestSpec(flavor=flavor, is_bfv=False,
                                   project_id="p", user_id="u")
        query = nova_request.placement_query(None, spec, None)
        f = nova_request.parse_query(query)
        self.assertEqual({"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 16},
                         f.resources)
        self.assertEqual({"CUSTOM_FAST"}, f.required)
        req = nova_request.schedule_request(f, str(uuid.uuid4()), spec,
                                            types.SimpleNamespace(user_id="x"),
                                            None)
        self.assertEqual("u", req.user_id)
        self.assertEqual(frozenset({"CUSTOM_FAST"}), req.query.required)

    def test_granular_flavor_is_parsed(self):
        flavor = objects.Flavor(vcpus=1, memory_mb=512, root_gb=1,
                                ephemeral_gb=0, swap=0,
                                extra_specs={"resources1:VGPU": "1"})
        spec = objects.RequestSpec(flavor=flavor, is_bfv=False)
        f = nova_request.parse_query(
            nova_request.placement_query(None, spec, None))
        self.assertEqual({"VGPU": 1}, dict(f.granular[0].resources))
        self.assertEqual({"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1},
                         dict(f.resources))

    def test_the_allocation_request_carries_the_mappings(self):
        root, gpu = str(uuid.uuid4()), str(uuid.uuid4())
        chosen = Candidate(root, {root: {"VCPU": 1}, gpu: {"VGPU": 1}},
                           mappings={"": [root], "1": [gpu]})
        body = nova_request.allocation_request(chosen)
        self.assertEqual({"": [root], "1": [gpu]}, body["mappings"])
        self.assertEqual({"VGPU": 1}, body["allocations"][gpu]["resources"])


class ConsumeAfterClaim(unittest.TestCase):
    """After each claim, as nova's own scheduler does, the request groups
    take the claimed allocation request's providers before the host state
    consumes the request: nova's PCI-in-placement accounting reads them
    (without them nova logs "failed to consume" and the host state keeps
    the devices free for the next instance of a multi-create)."""

    def test_groups_take_the_claimed_providers_before_the_host_consumes(self):
        from scheduler_ext.nova.scheduler import NovaScheduler
        root, pf, other = (str(uuid.uuid4()) for _ in range(3))
        spec = objects.RequestSpec(
            instance_group=None,
            requested_resources=[
                objects.RequestGroup(requester_id="pci-0", provider_uuids=[]),
                objects.RequestGroup(requester_id="not-claimed",
                                     provider_uuids=[other])])
        seen = {}
        host = types.SimpleNamespace(consume_from_request=lambda s: seen.update(
            s.get_request_group_mapping() or {}))
        claimed = Candidate(root, {root: {"VCPU": 1}, pf: {"CUSTOM_PCI": 1}},
                            mappings={"": [root], "pci-0": [pf]})
        NovaScheduler._consume(host, spec, str(uuid.uuid4()), claimed)
        self.assertEqual({"pci-0": [pf], "not-claimed": [other]}, seen)

    def test_a_spec_without_request_groups_consumes_as_before(self):
        from scheduler_ext.nova.scheduler import NovaScheduler
        root = str(uuid.uuid4())
        calls = []
        host = types.SimpleNamespace(consume_from_request=calls.append)
        spec = objects.RequestSpec(instance_group=None)
        NovaScheduler._consume(host, spec, str(uuid.uuid4()),
                               Candidate(root, {root: {"VCPU": 1}}))
        self.assertEqual([spec], calls)


def _sent(obj):
    """An object as sent over RPC, its changed fields in a fixed order."""
    def plain(value):
        if isinstance(value, dict):
            return {k: sorted(v) if k == "nova_object.changes" else plain(v)
                    for k, v in value.items()}
        return [plain(v) for v in value] if isinstance(value, list) else value
    return plain(obj.obj_to_primitive())


class WorkingCopy(unittest.TestCase):
    """A decision works on ``scheduler.working_copy`` of the RequestSpec:
    obj_clone's copy sharing only the flavor and the image, so that a
    request handed back to nova's own code is the one the conductor sent."""

    def spec(self):
        cell = objects.CellMapping(uuid=str(uuid.uuid4()), name="cell1")
        return objects.RequestSpec(
            flavor=objects.Flavor(vcpus=2, memory_mb=1024, root_gb=10,
                                  ephemeral_gb=0, swap=0, flavorid="f1",
                                  extra_specs={"trait:CUSTOM_FAST": "required"}),
            image=objects.ImageMeta(disk_format="qcow2",
                                    properties=objects.ImageMetaProps(
                                        hw_disk_bus="virtio")),
            is_bfv=False, project_id="p", user_id="u", num_instances=1,
            availability_zone="az1", ignore_hosts=["h0"],
            scheduler_hints={"group": ["g1"]},
            requested_destination=objects.Destination(cell=cell),
            instance_group=objects.InstanceGroup(
                uuid=str(uuid.uuid4()), policy="anti-affinity", hosts=["h9"],
                members=[str(uuid.uuid4())]),
            requested_resources=[objects.RequestGroup(
                requester_id="port-1", provider_uuids=[],
                resources={"NET_BW_EGR_KILOBIT_PER_SEC": 1000})],
            request_level_params=objects.RequestLevelParams(),
            pci_requests=objects.InstancePCIRequests(requests=[]),
            numa_topology=None)

    def test_as_nova_clones_it_sharing_only_what_a_decision_reads(self):
        from scheduler_ext.nova.scheduler import SHARED_FIELDS, working_copy
        spec = self.spec()
        work = working_copy(spec)
        self.assertEqual(_sent(spec.obj_clone()), _sent(work))
        for name in spec.fields:
            if not spec.obj_attr_is_set(name):
                continue
            value = getattr(spec, name)
            if name in SHARED_FIELDS:
                self.assertIs(value, getattr(work, name), name)
            elif isinstance(value, (list, dict, set, objects.base.NovaObject)):
                self.assertIsNot(value, getattr(work, name), name)

    def test_what_a_decision_changes_stays_on_the_copy(self):
        from nova import context as nova_context
        from nova.scheduler import host_manager, request_filter
        from scheduler_ext.nova.scheduler import NovaScheduler, working_copy
        spec = self.spec()
        sent = _sent(spec)
        work = working_copy(spec)
        agg = types.SimpleNamespace(uuid=str(uuid.uuid4()))
        with mock.patch.object(objects.AggregateList, "get_by_metadata",
                               return_value=[agg]), \
                mock.patch.object(objects.service, "get_minimum_version_all_cells",
                                  return_value=10 ** 6):
            request_filter.process_reqspec(nova_context.get_admin_context(), work)
        nova_request.parse_query(nova_request.placement_query(None, work, None))
        work.instance_uuid = str(uuid.uuid4())
        root, pf = str(uuid.uuid4()), str(uuid.uuid4())
        host = host_manager.HostState("h1", "n1", str(uuid.uuid4()))
        NovaScheduler._consume(host, work, work.instance_uuid, Candidate(
            root, {root: {"VCPU": 2}, pf: {"NET_BW_EGR_KILOBIT_PER_SEC": 1000}},
            mappings={"": [root], "port-1": [pf]}))
        # the decision did change its copy ...
        self.assertIn(agg.uuid, work.requested_destination.aggregates[0])
        self.assertIn("COMPUTE_STATUS_DISABLED", work.root_forbidden)
        self.assertIn("OWNER_NOVA", work.root_required)
        self.assertEqual(["h9", "h1"], work.instance_group.hosts)
        self.assertEqual([pf], work.requested_resources[0].provider_uuids)
        # ... and nothing of what the conductor sent
        self.assertEqual(sent, _sent(spec))


class MovedElsewhere(unittest.TestCase):

    def m(self, sc, sn, dc, dn):
        return types.SimpleNamespace(source_compute=sc, source_node=sn,
                                     dest_compute=dc, dest_node=dn)

    def test_cases(self):
        self.assertFalse(nova_reconcile.moved_elsewhere(self.m("h1", "n1", "h1", "n1")))
        self.assertFalse(nova_reconcile.moved_elsewhere(self.m("h1", "n1", None, None)))
        self.assertTrue(nova_reconcile.moved_elsewhere(self.m("h1", "n1", "h2", "n2")))


class FindMove(unittest.TestCase):
    """The move look-up: the source host is the root the migration's
    allocations sit on when the driver can tell; else nova's ComputeNode
    record is read."""

    def _find(self, root_of):
        migration = migrations.PendingMigration(
            uuid=str(uuid.uuid4()), source_compute="host1", source_node="node1")
        node = types.SimpleNamespace(uuid="node-record")
        held = types.SimpleNamespace(allocations={"rp": {"VCPU": 1}})
        spec = objects.RequestSpec(
            requested_destination=objects.Destination(
                cell=objects.CellMapping(uuid=str(uuid.uuid4()))),
            ignore_hosts=[])
        reads = []

        def get_node(ctxt, host, nodename):
            reads.append((host, nodename))
            return node

        with mock.patch.object(nova_request.nova_context, "target_cell",
                               lambda ctxt, cell: contextlib.nullcontext(ctxt)), \
                mock.patch.object(migrations, "pending_migration",
                                  return_value=migration), \
                mock.patch.object(objects.ComputeNode, "get_by_host_and_nodename",
                                  side_effect=get_node):
            move = nova_request.find_move(None, "inst", spec, lambda u: held,
                                          root_of)
        return move, reads

    def test_root_from_the_allocations_without_the_node_read(self):
        move, reads = self._find(lambda allocs: "root-of-rp")
        self.assertEqual("root-of-rp", move.source_root)
        self.assertEqual([], reads)

    def test_node_record_when_the_driver_cannot_tell(self):
        move, reads = self._find(lambda allocs: None)
        self.assertEqual("node-record", move.source_root)
        self.assertEqual([("host1", "node1")], reads)


def small_host(client):
    """A SmallFakeDriver-sized compute node: VCPU 2, MEMORY_MB 8192,
    DISK_GB 1028."""
    prov = client.create_provider("host1", str(uuid.uuid4()))
    client.set_inventories(prov.uuid, prov.generation, {
        "VCPU": Inventory(2), "MEMORY_MB": Inventory(8192),
        "DISK_GB": Inventory(1028)})
    return prov.uuid


class ReconcileRules(unittest.TestCase):
    """The service applies ``moves.reconcile``'s rules (the CLI's too)."""

    def setUp(self):
        self.client = EmbeddedPlacement()
        self.host = small_host(self.client)
        self.inst = str(uuid.uuid4())
        self.mig = str(uuid.uuid4())
        self.old = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 100}

    def _hold(self, allocs):
        self.client.put_allocations(self.inst, AllocationWrite(
            allocs, "p", "u", None, "INSTANCE"))

    def _state(self, host=None):
        # a reverted same-host resize: the live flavor is the old one
        return InstanceState(self.inst, host or self.host, self.old, "p", "u",
                             (MoveState(self.mig, "", "", {}, {}, False),))

    def test_trims_to_the_live_flavor_keeping_foreign_classes(self):
        self.client.create_resource_class("CUSTOM_PORT_BW")
        gen, invs = self.client.get_inventories(self.host)
        invs = dict(invs)
        invs["CUSTOM_PORT_BW"] = Inventory(1000)
        self.client.set_inventories(self.host, gen, invs)
        self._hold({self.host: {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 100,
                                "CUSTOM_PORT_BW": 10}})
        fix = Reconciler(self.client).reconcile_one(self._state())
        self.assertTrue(fix.applied)
        self.assertEqual({self.host: dict(self.old, CUSTOM_PORT_BW=10)},
                         self.client.get_consumer(self.inst).allocations)

    def test_a_plan_that_fails_is_returned_not_raised(self):
        gone = str(uuid.uuid4())
        fix = Reconciler(self.client).reconcile_one(self._state(gone))
        self.assertFalse(fix.applied)
        self.assertIn(gone, fix.error)


class ResizeNotifications(unittest.TestCase):

    def test_resize_end_events_wake_the_reconcile(self):
        from scheduler_ext.moves.tracker import ReconcileTracker
        from scheduler_ext.nova import notifications
        tracker = ReconcileTracker()
        endpoint = notifications.ResizeEndedEndpoint(tracker)
        payload = {"nova_object.data": {"uuid": "u-1"}}
        endpoint.info({}, "compute.host1", "instance.resize_revert.end",
                      payload, {})
        endpoint.error({}, "compute.host1", "instance.resize.error",
                       {"nova_object.data": {"uuid": "u-2"}}, {})
        self.assertTrue(tracker.woken_event.is_set())
        self.assertEqual({"u-1", "u-2"}, set(tracker.work({})))
        rule = notifications.ResizeEndedEndpoint.filter_rule
        for event in notifications.EVENTS:
            self.assertTrue(rule.match({}, "p", event, {}, payload), event)
        self.assertFalse(rule.match({}, "p", "instance.resize.start", {},
                                    payload))


class ReportClientAdapterTests(unittest.TestCase):
    """Our placement client rides nova's report client."""

    def test_verbs_and_global_request_id(self):
        from nova import context as nova_context
        from scheduler_ext.nova import placement_client
        calls = []

        class Report:
            def get(self, url, version=None, global_request_id=None):
                calls.append(("GET", url, version, global_request_id))

            def put(self, url, data, version=None, global_request_id=None):
                calls.append(("PUT", url, data, version, global_request_id))

        ctxt = nova_context.RequestContext("u", "p", is_admin=True,
                                           overwrite=True,
                                           global_request_id="req-" + "a" * 36)
        adapter = placement_client.ReportClientAdapter(Report())
        adapter.request("/x", "GET", microversion="1.36", raise_exc=False)
        adapter.request("/y", "PUT", json={"a": 1}, microversion="1.39")
        self.assertEqual([("GET", "/x", "1.36", ctxt.global_id),
                          ("PUT", "/y", {"a": 1}, "1.39", ctxt.global_id)],
                         calls)

    def test_auth_failure_is_a_typed_error(self):
        from keystoneauth1 import exceptions as ks_exc
        from scheduler_ext import errors
        from scheduler_ext.nova import placement_client

        class Report:
            def get(self, url, version=None, global_request_id=None):
                raise ks_exc.Unauthorized("token expired")

        client = placement_client.from_report_client(Report())
        with self.assertRaises(errors.PlacementUnavailable):
            client.get_consumer(str(uuid.uuid4()))
