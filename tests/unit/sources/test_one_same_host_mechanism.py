"""Issue 33, "one same-host mechanism": whichever source answers a move
(the numpy engine over the whole fleet, or placement with the engine on
the source's own providers), the same host is the same candidate: each
class the server holds on the same providers, with the old allocations
freed (``same_host``) and held (``held_source``), the same amount of
every class, and the same ``beside_old``. The free choices (new devices,
a class new to the server) are each source's own: the engine's pick, or
placement's (stock's claim on the source).

Random fleets: roots with or without a local disk, 0 to 2 sharing
providers in their aggregate, pGPUs (VGPU) and a NIC (bandwidth) as child
providers; a server booted somewhere, then resized to a random flavor
(unnumbered, or with a granular vGPU or port group)."""

import uuid

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scheduler_ext import driver as se_driver
from scheduler_ext import errors
from scheduler_ext.lab.fleet import SHARING_TRAIT, add_host
from scheduler_ext.placement import (DEVICE_CLASSES, AllocationWrite, Inventory,
                                     allocations)
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest, RequestGroup
from scheduler_ext.sources.engine import EngineCandidateSource
from scheduler_ext.sources.placement import PlacementCandidateSource
from tests.unit.helpers import uuid_factory
from tests.unit.sources.test_placement_source import PlacementWithCandidates

CONF = se_driver.make_conf(refresh_interval=0)
BW = "NET_BW_EGR_KILOBIT_PER_SEC"
AGG = str(uuid.UUID(int=5))


def _fleet(client, draw, uid):
    """Hosts (root uuids) of a random fleet."""
    for i in range(draw(st.integers(0, 2))):
        add_host(client, f"ss{i}", {"DISK_GB": Inventory(draw(st.sampled_from(
            [30, 60, 200])))}, (AGG,), (SHARING_TRAIT,), uuid=uid())
    hosts = []
    for i in range(draw(st.integers(1, 3))):
        invs = {"VCPU": Inventory(draw(st.integers(2, 8))),
                "MEMORY_MB": Inventory(8192)}
        if draw(st.booleans()):
            invs["DISK_GB"] = Inventory(draw(st.sampled_from([30, 100])))
        cn = add_host(client, f"cn{i}", invs, (AGG,), uuid=uid())
        for k in range(draw(st.integers(0, 2))):
            gpu = client.create_provider(f"cn{i}_pgpu{k}", uuid=uid(),
                                         parent_provider_uuid=cn)
            client.set_inventories(gpu.uuid, gpu.generation, {
                "VGPU": Inventory(draw(st.integers(1, 3)))})
        if draw(st.booleans()):
            nic = client.create_provider(f"cn{i}_nic", uuid=uid(),
                                         parent_provider_uuid=cn)
            client.set_inventories(nic.uuid, nic.generation,
                                   {BW: Inventory(2000)})
        hosts.append(cn)
    return hosts


def _flavor(draw):
    resources = {"VCPU": draw(st.integers(1, 3)), "MEMORY_MB": 1024}
    if draw(st.booleans()):
        resources["DISK_GB"] = draw(st.sampled_from([10, 20, 40]))
    vgpu = draw(st.sampled_from(["none", "unnumbered", "granular"]))
    if vgpu == "unnumbered":
        resources["VGPU"] = draw(st.integers(1, 2))
    granular = []
    if vgpu == "granular":
        granular.append(RequestGroup("_GPU", {"VGPU": draw(st.integers(1, 2))}))
    if draw(st.booleans()):
        granular.append(RequestGroup("_PORT", {BW: draw(st.sampled_from([500, 1500]))}))
    return CandidateRequest(resources, granular=tuple(granular),
                            group_policy="none" if len(granular) > 1 else None)


def _kept(cand, released):
    """Per class the server held (but vGPUs: new ones), the providers the
    candidate puts it on."""
    held = allocations.classes(released) - DEVICE_CLASSES
    return {rc: {rp for rp, res in cand.allocations.items() if res.get(rc)}
            for rc in held}


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data(), seed=st.integers(0, 99))
def test_engine_and_placement_sources_give_the_same_same_host_candidate(
        data, seed):
    client = EmbeddedPlacement()
    hosts = _fleet(client, data.draw, uuid_factory(seed))
    view, engine = EngineCandidateSource.build(client, CONF)
    old_query = _flavor(data.draw)
    booted = engine.candidates(old_query, limit=10)
    if not booted:
        event("nothing to boot on")
        return
    old = data.draw(st.sampled_from(list(booted)))
    migration = str(uuid.UUID(int=seed + 1000))
    client.put_allocations(migration, AllocationWrite(
        {rp: dict(res) for rp, res in old.allocations.items()}, "p", "u",
        None, "MIGRATION"))
    released = {rp: dict(res) for rp, res in old.allocations.items()}
    query = _flavor(data.draw)
    view.refresh()
    _, placement = PlacementCandidateSource.build(PlacementWithCandidates(client), CONF)
    try:
        want = engine.move_candidates(query, limit=5, source=old.root,
                                      released=released)
    except errors.Unsupported:
        event("unsupported")
        return
    got = placement.move_candidates(query, limit=5, source=old.root,
                                    released=released)
    for cand in ("same_host", "held_source"):
        g, w = getattr(got, cand), getattr(want, cand)
        assert (g is None) == (w is None), cand
        if g is not None:
            assert _kept(g, released) == _kept(w, released), cand
            assert allocations.class_totals(g.allocations) == \
                allocations.class_totals(w.allocations), cand
    assert got.beside_old == want.beside_old
    event(f"same host {'found' if want.same_host else 'none'}, held "
          f"{'found' if want.held_source else 'none'}, beside_old "
          f"{want.beside_old}, {len(hosts)} hosts")
