"""Property: with TWO sharing providers serving every host, and roots that
keep their own DISK_GB while being in the sharing aggregate, any sequence
of boots, resizes, migrations, confirms, reverts, failures with
reschedules, deletes and reconciles, with other schedulers' boots and
deletes and injected 409s landing between our read and our write, keeps
the invariants PER PROVIDER: usage equals the sum of allocations and never
exceeds capacity on every provider; no consumer holds a class on two
providers; a server's disk stays on the provider that holds it unless the
server moved to another host; after reconcile each server holds exactly
its flavor and nothing is left behind.

Only a boot, resize or migration may fail, and only with NoValidHost
(every claim refused, or no host fits); confirm, revert, failures,
deletes and reconciles never raise. Over the run, most boots and many
moves succeed (``test_the_run_moved``).

2,000 examples, small fleets and short sequences so the run stays well
under a minute on the CI machine."""

import collections
import os
import uuid

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scheduler_ext import driver as se_driver
from scheduler_ext import errors
from scheduler_ext.lab import invariants
from scheduler_ext.lab.fleet import SHARING_TRAIT, add_host
from scheduler_ext.lab.nova_model import NovaModel
from scheduler_ext.moves.reconcile import Reconciler
from scheduler_ext.moves.strategy import SameHostMoveStrategy
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.sources.engine import EngineCandidateSource
from tests.unit.helpers import uuid_factory

CONF = se_driver.make_conf(refresh_interval=0)
#: per operation: tried, succeeded (over every example of the run)
TALLY: collections.Counter = collections.Counter()
#: the operations that schedule, the only ones that may fail (NoValidHost)
SCHEDULING = ("boot", "resize", "migrate")

FLAVORS = [
    {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10},
    {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 20},
    {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 40},
]
OPS = ("boot", "boot", "resize", "resize", "migrate", "confirm", "revert",
       "fail", "delete", "reconcile", "other_disk", "other_disk")
#: what happens between our read and our write, per scheduler write
INTERFERE = ("none", "none", "none", "409", "bump", "other_boot",
             "other_delete")


def _fleet(client, hosts, local, rng_seed):
    uid = uuid_factory(rng_seed)
    agg = uid()
    # two sharing providers per host: every host is in their aggregate
    sharing = [add_host(client, f"ss{i}", {"DISK_GB": Inventory(size)},
                        (agg,), (SHARING_TRAIT,), uuid=uid())
               for i, size in enumerate((80, 100))]
    nodes = []
    for i in range(hosts):
        invs = {"VCPU": Inventory(4), "MEMORY_MB": Inventory(6144)}
        if i in local:            # a root with its own disk, in the aggregate
            invs["DISK_GB"] = Inventory(60)
        nodes.append(add_host(client, f"cn{i}", invs, (agg,), uuid=uid()))
    return nodes, sharing


class Interfering:
    """Our scheduler's placement client: before each of its allocation
    writes, another actor does what the drawn schedule says (nothing; a
    409 without any write; re-writes the consumers' same contents, bumping
    their generations; boots or deletes another consumer)."""

    def __init__(self, inner, draw, hosts, others):
        self.inner, self.draw, self.hosts, self.others = inner, draw, hosts, others

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _interfere(self, consumers):
        what = self.draw(st.sampled_from(INTERFERE))
        event(f"interference {what}")
        if what == "409":
            raise errors.ConcurrentUpdate("injected: consumer generation conflict")
        if what == "bump":
            for c in consumers:
                cur = self.inner.get_consumer(c)
                if cur.allocations:
                    self.inner.put_allocations(c, cur.write(cur.allocations))
        elif what == "other_boot":
            host = self.draw(st.sampled_from(self.hosts))
            consumer = str(uuid.uuid4())
            try:
                self.inner.put_allocations(consumer, AllocationWrite(
                    {host: {"VCPU": 1}}, "other", "other", None))
                self.others[consumer] = host
            except errors.CapacityExceeded:
                pass
        elif what == "other_delete" and self.others:
            consumer = self.draw(st.sampled_from(sorted(self.others)))
            self.inner.delete_allocations(consumer)
            del self.others[consumer]

    def post_allocations(self, writes):
        self._interfere(list(writes))
        return self.inner.post_allocations(writes)

    def put_allocations(self, consumer, write):
        self._interfere([consumer])
        return self.inner.put_allocations(consumer, write)


def _disk_where(client, consumer):
    held = client.get_consumer(consumer).allocations
    return {rp for rp, res in held.items() if res.get("DISK_GB")}


def _check_disks(client, model, disk):
    """A server's disk stays where it is unless the server changed host."""
    for u, server in model.servers.items():
        move = server.active
        if move is None:
            where = _disk_where(client, u)
            if disk.get(u, (None,))[0] != server.host:
                [rp] = where
                disk[u] = (server.host, rp)
            assert where == {disk[u][1]}, (u, where, disk[u])
        elif move.source == move.dest:
            both = _disk_where(client, u) | _disk_where(client, move.migration_uuid)
            assert both == {disk[u][1]}, (u, both, disk[u])
        else:
            assert _disk_where(client, move.migration_uuid) <= {disk[u][1]}


def _rolled_back(model, client, u):
    """nova's conductor after a scheduling error: the migration's
    allocations go back to the instance."""
    server = model.servers[u]
    mig = server.moves[-1].migration_uuid
    held = client.get_consumer(mig)
    if held.allocations:
        inst = client.get_consumer(u)
        client.post_allocations({
            mig: held.write({}, consumer_type="MIGRATION"),
            u: inst.write(held.allocations, consumer_type="INSTANCE",
                          project_id=model.project_id, user_id=model.user_id)})


def _other_disk(client, sharing, others, draw):
    """Another scheduler's server takes disk on one sharing provider, so
    which one has the most free space changes along the way."""
    ss = draw(st.sampled_from(sharing))
    consumer = str(uuid.uuid4())
    try:
        client.put_allocations(consumer, AllocationWrite(
            {ss: {"DISK_GB": draw(st.sampled_from([10, 20, 30]))}},
            "other", "other", None))
        others[consumer] = ss
    except errors.CapacityExceeded:
        pass


def _step(op, model, client, pick, draw):
    servers = sorted(model.servers)
    moving = [u for u in servers if model.servers[u].active]
    still = [u for u in servers if not model.servers[u].active]
    if op == "boot":
        model.boot(pick(FLAVORS))
    elif op in ("resize", "migrate") and still:
        u = pick(still)
        try:
            if op == "resize":
                model.resize(u, pick(FLAVORS), allow_same_host=draw(st.booleans()))
            else:
                model.migrate(u)
        except errors.SchedulerExtError as exc:
            if not isinstance(exc, errors.NoValidHost):
                _rolled_back(model, client, u)
            raise
    elif op == "confirm" and moving:
        model.confirm(pick(moving))
    elif op == "revert" and moving:
        model.revert(pick(moving))
    elif op == "fail" and moving:
        model.fail_on_destination(pick(moving))
    elif op == "delete" and servers:
        model.delete(pick(servers))
    elif op == "reconcile":
        fixes = Reconciler(client).run(model.states(), apply=True)
        assert all(f.applied for f in fixes), [f.error for f in fixes]
        assert invariants.check_servers(client, model.states(), True) == []


@settings(max_examples=int(os.environ.get("SCHEDULER_EXT_PROPERTY_EXAMPLES", "2000")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data(), hosts=st.integers(1, 3),
       local=st.sets(st.integers(0, 2), max_size=2),
       prefer_same_host=st.booleans(),
       ops=st.lists(st.sampled_from(OPS), min_size=3, max_size=10))
def test_moves_keep_per_provider_invariants_with_two_sharing_providers(
        data, hosts, local, prefer_same_host, ops):
    client = EmbeddedPlacement()
    nodes, sharing = _fleet(client, hosts, local, data.draw(st.integers(0, 9)))
    others: dict[str, str] = {}
    ours = Interfering(client, data.draw, nodes, others)
    # what SchedulerDriver builds (without stevedore's entry-point scan
    # per example): the engine source, its view and the same-host strategy
    view, source = EngineCandidateSource.build(ours, CONF)
    strategy = SameHostMoveStrategy(ours, source, view,
                                    prefer_same_host=prefer_same_host)

    def select(request):
        view.refresh()
        return strategy.select(request)
    model = NovaModel(client, select, uuid_factory=uuid_factory(7))
    disk: dict[str, tuple[str, str]] = {}
    pick = lambda xs: data.draw(st.sampled_from(xs))  # noqa: E731
    for op in ops:
        # a resize or migration acts on a server with no move in progress
        acts = op == "boot" or op in SCHEDULING and any(
            not s.active for s in model.servers.values())
        TALLY[op, "tried"] += acts
        try:
            if op == "other_disk":
                _other_disk(client, sharing, others, data.draw)
            else:
                _step(op, model, client, pick, data.draw)
        except errors.NoValidHost as exc:
            assert acts, (op, exc)
            event(f"{op}: NoValidHost")
        else:
            TALLY[op, "done"] += acts
        assert invariants.check_providers(client) == []
        assert invariants.check_one_provider_per_class(
            client, list(model.servers) + [m.migration_uuid for s in
                                            model.servers.values()
                                            for m in s.moves]) == []
        assert invariants.check_servers(client, model.states(), exact=False) == []
        _check_disks(client, model, disk)
    for u in sorted(model.servers):
        if model.servers[u].active:
            model.confirm(u)
    assert all(f.applied for f in Reconciler(client).run(model.states(), apply=True))
    assert invariants.check_providers(client) == []
    assert invariants.check_servers(client, model.states(), exact=True) == []
    _check_disks(client, model, disk)
    known = set(model.servers) | set(others)
    for prov in nodes + sharing:
        assert set(client.get_provider_allocations(prov)) <= known


def test_the_run_moved():
    """The property run above exercised moves, not only refusals: most of
    its boots and over 40% of its resizes and migrations succeeded (at
    2,000 examples: 2,594 of 2,889 boots, 581 of 1,058 moves; a migration
    on a one-host fleet has nowhere to go)."""
    moves = TALLY["resize", "done"] + TALLY["migrate", "done"]
    tried = TALLY["resize", "tried"] + TALLY["migrate", "tried"]
    print(dict(TALLY))
    assert TALLY["boot", "done"] > 0.75 * TALLY["boot", "tried"] > 0, TALLY
    assert moves > 0.4 * tried > 0, TALLY
