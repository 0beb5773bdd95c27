"""``scheduler-ext audit`` in nova 34's functional harness: instances and
migrations read through nova's objects, a real placement (nova's placement
fixture) reached from a nova.conf ``[placement]`` section, scheduler-ext's
scheduler manager. Run by ``test_nova_functional.py`` (testtools, in a
subprocess).

Each kind of damage the audit knows is made on a live two-host fleet with
a sharing storage provider; the audit finds each, ``--apply`` fixes each,
and a second audit is clean.
"""

import io
import json
import os
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from unittest import mock

from oslo_utils.fixture import uuidsentinel as uuids

from nova import context as nova_context
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import integrated_helpers

from scheduler_ext.cmd import audit, main as cli
from tests.nova.harness import OurCases

SHARES = "MISC_SHARES_VIA_AGGREGATE"


class AuditReadsNova(OurCases,
                     integrated_helpers.ProviderUsageBaseTestCase):
    compute_driver = "fake.MediumFakeDriver"

    def setUp(self):
        super().setUp()
        self.useFixture(nova_fixtures.HostNameWeigherFixture(
            weights={"host1": 100, "host2": 10}))
        self.compute1 = self._start_compute(host="host1")
        self.compute2 = self._start_compute(host="host2")
        # the damage below must stay until the audit sees it: no reconcile
        # loop (it would repair the same-host resize within seconds)
        self.flags(reconcile_interval=0, group="scheduler_ext")
        self.scheduler_service.stop()
        self.scheduler_service = self.start_service("scheduler")
        self.rp1 = self._get_provider_uuid_by_host("host1")
        self.rp2 = self._get_provider_uuid_by_host("host2")
        self.flags(allow_resize_to_same_host=True)
        self.small = self._create_flavor(name="small", vcpu=1, memory_mb=1024,
                                         disk=10, ephemeral=0)
        self.large = self._create_flavor(name="large", vcpu=2, memory_mb=512,
                                         disk=20, ephemeral=0)
        self.f1 = self.flavor_resources(self.api.get_flavor(self.small))
        self.f2 = self.flavor_resources(self.api.get_flavor(self.large))

    # ------------------------------------------------------------ helpers
    def _shared_storage_for_host2(self):
        """A sharing provider with DISK_GB in an aggregate with host2, which
        keeps no DISK_GB of its own (as a libvirt host on shared storage)."""
        ss = self._post_resource_provider("shared-storage")["uuid"]
        self._set_inventory(ss, {"resource_class": "DISK_GB", "total": 2000})
        self._set_provider_traits(ss, [SHARES])
        self._set_aggregate(ss, uuids.shared_disk)
        self._set_aggregate(self.rp2, uuids.shared_disk)
        invs = self._get_provider_inventory(self.rp2)
        del invs["DISK_GB"]
        gen = self.placement.get("/resource_providers/%s" % self.rp2).body[
            "generation"]
        self.placement.put("/resource_providers/%s/inventories" % self.rp2,
                           {"resource_provider_generation": gen,
                            "inventories": invs})
        return ss

    def _write(self, consumer, allocs, ctype="INSTANCE"):
        """PUT a consumer's allocations through placement's API."""
        current = self.placement.get("/allocations/%s" % consumer,
                                     version="1.38").body
        body = {"allocations": {rp: {"resources": res}
                                for rp, res in allocs.items()},
                "project_id": current.get("project_id", "project"),
                "user_id": current.get("user_id", "user"),
                "consumer_generation": current.get("consumer_generation"),
                "consumer_type": ctype}
        resp = self.placement.put("/allocations/%s" % consumer, body,
                                  version="1.38")
        self.assertEqual(204, resp.status, resp.body)

    def _audit(self, *extra):
        """(exit code, stdout and stderr) of ``scheduler-ext audit -f value`` with a nova.conf
        holding only ``[placement]``, nova read through this test's admin
        context (its databases are the harness's)."""
        fd, path = tempfile.mkstemp(suffix=".conf")
        with os.fdopen(fd, "w") as f:
            f.write("[placement]\nauth_type = admin_token\ntoken = admin\n"
                    "endpoint = %s\n" % self.placement.fixture.endpoint)
        self.addCleanup(os.unlink, path)
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(audit.Audit, "nova_context",
                               nova_context.get_admin_context()), \
                redirect_stdout(out), redirect_stderr(err):
            code = cli.main(["audit", "--config-file", path, "-f", "value"]
                            + list(extra))
        return code, out.getvalue() + err.getvalue()

    # -------------------------------------------------------------- damage
    def _damage(self):
        """Every kind of damage, one server each; returns what to check."""
        ss = self._shared_storage_for_host2()
        # a migration consumer left behind: cold migration host1 -> host2,
        # confirmed; then the migration holds the old allocations again
        moved = self.boot_on(self.small, "host1")
        moved = self._migrate_server(moved)
        self.assertEqual("host2", moved["OS-EXT-SRV-ATTR:host"])
        migration = self.get_migration_uuid_for_instance(moved["id"])
        self._confirm_resize(moved)
        self.assertHolds(moved["id"], {
            self.rp2: {"VCPU": 1, "MEMORY_MB": 1024}, ss: {"DISK_GB": 10}})
        self._write(migration, {self.rp1: self.f1}, "MIGRATION")
        # a same-host resize still holding max(old, new) after the confirm
        same = self.boot_on(self.small, "host1")
        same = self._resize_server(same, self.large)
        self.assertEqual("host1", same["OS-EXT-SRV-ATTR:host"])
        self._confirm_resize(same)
        both = self.flavor_resources(self.api.get_flavor(self.small),
                                     self.api.get_flavor(self.large))
        self.assertHolds(same["id"], {self.rp1: both})
        # missing DISK_GB on a sharing provider: a server moved to host2
        # keeps its disk on the sharing provider; it loses that allocation
        shared = self._migrate_server(self.boot_on(self.small, "host1"))
        self._confirm_resize(shared)
        self.assertHolds(shared["id"], {
            self.rp2: {"VCPU": 1, "MEMORY_MB": 1024}, ss: {"DISK_GB": 10}})
        self._write(shared["id"], {self.rp2: {"VCPU": 1, "MEMORY_MB": 1024}})
        # over capacity: a server holding more memory than its flavor on a
        # host whose inventory was then lowered below what is used
        fat = self.boot_on(self.small, "host1")
        self._write(fat["id"], {self.rp1: dict(self.f1, MEMORY_MB=4096)})
        used = self._get_provider_usages(self.rp1)["MEMORY_MB"]
        invs = self._get_provider_inventory(self.rp1)
        invs["MEMORY_MB"]["total"] = used - 1
        invs["MEMORY_MB"]["allocation_ratio"] = 1.0
        gen = self.placement.get("/resource_providers/%s" % self.rp1).body[
            "generation"]
        self.placement.put("/resource_providers/%s/inventories" % self.rp1,
                           {"resource_provider_generation": gen,
                            "inventories": invs})
        # an unknown consumer
        self._write(uuids.stray, {self.rp2: {"VCPU": 1}})
        return dict(ss=ss, moved=moved["id"], migration=migration,
                    same=same["id"], shared=shared["id"], fat=fat["id"])

    def test_audit_finds_applies_and_is_clean_again(self):
        d = self._damage()
        code, out = self._audit()
        self.assertEqual(1, code, out)
        self.assertIn("MEMORY_MB: usage", out)
        self.assertIn("exceeds capacity", out)
        self.assertIn("finished migration %s still holds" % d["migration"], out)
        for server in (d["moved"], d["same"], d["shared"], d["fat"]):
            self.assertIn("instance %s" % server, out)
        self.assertIn("unknown consumer  %s" % uuids.stray, out)
        self.assertIn("would apply", out)
        # the JSON export holds what nova's objects said
        fd, export = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        self.addCleanup(os.unlink, export)
        self._audit("--export", export)
        with open(export) as f:
            exported = {i["uuid"]: i for i in json.load(f)}
        self.assertEqual(self.f1, exported[d["fat"]]["resources"])
        self.assertEqual([d["migration"]], [
            m["migration_uuid"] for m in exported[d["moved"]]["moves"]])
        # apply: one fix at a time, each printed, then the summary
        code, out = self._audit("--apply")
        self.assertEqual(0, code, out)
        self.assertIn("fix 1/5 applied", out)
        self.assertIn("fix 5/5 applied", out)
        self.assertIn("5 applied, 0 failed, 0 not attempted; after the fixes "
                      "0 provider problems", out)
        self.assertHolds(d["migration"], {})
        on_host2 = {self.rp2: {"VCPU": 1, "MEMORY_MB": 1024},
                    d["ss"]: {"DISK_GB": 10}}
        self.assertHolds(d["moved"], on_host2)
        self.assertHolds(d["same"], {self.rp1: self.f2})
        self.assertHolds(d["shared"], on_host2)
        self.assertHolds(d["fat"], {self.rp1: self.f1})
        self.assertHolds(uuids.stray, {})
        # a second audit is clean
        code, out = self._audit()
        self.assertEqual(0, code, out)
        self.assertIn("0 provider problems, 0 migration allocations, 0 unknown "
                      "consumers, 0 reconcile fixes", out)
