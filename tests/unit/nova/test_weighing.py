"""The engine weighs with nova's own ``[filter_scheduler]`` options in a
nova scheduler process (issue 35: it read copies in ``[scheduler_ext]``,
so an operator who set nova to pack still got the engine spreading)."""

import uuid

import nova.conf
import pytest
from oslo_config import fixture as config_fixture

from scheduler_ext.engine.weigh import Weigher, Weighing
from scheduler_ext.nova import service, weighing
from scheduler_ext.placement import AllocationWrite
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest
from tests.unit.helpers import small_host
from tests.unit.sources.test_placement_source import PlacementWithCandidates

CONF = nova.conf.CONF


@pytest.fixture
def nova_conf():
    """nova's global configuration with our options, overrides undone
    after the test."""
    service.register_opts(CONF)
    fixture = config_fixture.Config(CONF)
    fixture.setUp()
    yield fixture
    fixture.cleanUp()


@pytest.fixture
def fuller_and_emptier(monkeypatch):
    """(service's driver factory, fuller host, emptier host): two equal
    hosts, one holding a 4 GiB RAM-only allocation, behind an embedded
    placement the service uses as its client; the scheduler the service
    builds is its driver alone (nova's RPC is not set up here)."""
    client = EmbeddedPlacement()
    fuller, emptier = small_host(client, "fuller"), small_host(client, "emptier")
    client.put_allocations(str(uuid.UUID(int=1)), AllocationWrite(
        {fuller: {"MEMORY_MB": 4096}}, "p", "u", None))
    served = PlacementWithCandidates(client)    # the fallback source too
    monkeypatch.setattr(service.ExtService, "client", lambda self: served)
    monkeypatch.setattr(service, "NovaScheduler",
                        lambda driver, host_manager, client: driver)
    return (lambda: service.ExtService(host_manager=None).scheduler()), fuller, emptier


def _order(source) -> list[str]:
    query = CandidateRequest({"VCPU": 1, "MEMORY_MB": 1024})
    return [c.root for c in source.candidates(query, limit=2)]


def test_engine_packs_when_nova_ram_weight_multiplier_is_negative(
        nova_conf, fuller_and_emptier):
    build, fuller, emptier = fuller_and_emptier
    nova_conf.config(group="filter_scheduler", ram_weight_multiplier=-1.0)
    assert _order(build().source) == [fuller, emptier]


def test_placement_fallback_weighs_with_novas_multipliers_too(
        nova_conf, fuller_and_emptier):
    """The source asked when the engine cannot answer a query gets the same
    weighing."""
    build, fuller, emptier = fuller_and_emptier
    nova_conf.config(group="filter_scheduler", ram_weight_multiplier=-1.0)
    assert _order(build().fallback.source) == [fuller, emptier]


def test_engine_spreads_with_novas_default_multipliers(nova_conf, fuller_and_emptier):
    build, fuller, emptier = fuller_and_emptier
    assert _order(build().source) == [emptier, fuller]


def test_weighing_reads_every_filter_scheduler_multiplier(nova_conf):
    nova_conf.config(group="filter_scheduler", ram_weight_multiplier=-1.0,
                     cpu_weight_multiplier=0.5, disk_weight_multiplier=0.0,
                     host_subset_size=3)
    assert weighing.from_nova_conf(CONF) == Weighing(
        Weigher.nova(ram=-1.0, cpu=0.5, disk=0.0))


def test_host_subset_size_is_drawn_once_by_novas_ranking_not_by_the_engine(nova_conf):
    """Under nova the engine only pre-selects; nova's ranking applies
    ``host_subset_size`` over nova's weights. A draw in the engine too
    reordered the pool nova's stable sort then breaks ties in."""
    nova_conf.config(group="filter_scheduler", host_subset_size=5)
    assert weighing.from_nova_conf(CONF).host_subset_size == 1


def test_our_group_has_no_copies_of_novas_weighing_options(nova_conf):
    for name in ("ram_weight_multiplier", "cpu_weight_multiplier",
                 "disk_weight_multiplier", "host_subset_size"):
        assert name not in CONF.scheduler_ext
