"""The scheduler driver core (nova-free).

``SchedulerDriver`` loads its candidate source and its move strategy
through stevedore, by the names in ``[scheduler_ext]``, builds the source
and its upkeep (``SourcePlugin.build``: the engine's ``FleetView``, the one
object it tells to refresh and asks for reads) with the ``Weighing`` it is
given (the nova layer passes nova's
``[filter_scheduler]`` multipliers and ``host_subset_size``; anyone else
gets nova's defaults), and answers
``select_destinations``: for each instance the claimed Candidate, then up
to ``max_alternates`` alternates (under nova, ``[scheduler] max_attempts``
- 1; 2 when the caller gives none). A query the source cannot answer exactly
(``Unsupported``) goes to the ``placement`` source, loaded by name too,
when the placement client has the allocation-candidates endpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from oslo_config import cfg
from oslo_log import log as logging
from stevedore import driver as sd_driver

from scheduler_ext import conf as se_conf
from scheduler_ext import errors
from scheduler_ext.engine.weigh import DEFAULT_WEIGHING, Weighing
from scheduler_ext.moves.request import ScheduleRequest
from scheduler_ext.placement import Allocations, CandidatesEndpoint, PlacementClient
from scheduler_ext.placement.model import ConsumerAllocations
from scheduler_ext.sources.base import (Candidate, CandidateSource, FleetUpkeep,
                                        Ranking, SourcePlugin)

LOG = logging.getLogger(__name__)

DRIVER_NAMESPACE = "scheduler_ext.driver"
SOURCE_NAMESPACE = "scheduler_ext.engine"
STRATEGY_NAMESPACE = "scheduler_ext.move_strategy"
#: The source asked when the configured one cannot answer a query.
FALLBACK_SOURCE = "placement"


def load_plugin(namespace: str, name: str, option: str) -> Any:
    """The class registered as ``name`` in the stevedore ``namespace``;
    ConfigError naming ``option`` if there is none."""
    try:
        return sd_driver.DriverManager(namespace, name).driver
    except (RuntimeError, ImportError) as exc:
        raise errors.ConfigError(
            f"[scheduler_ext] {option} = {name!r}: no such plugin in the "
            f"{namespace} namespace ({exc})", option=option, value=name) from exc


def make_conf(**overrides: Any) -> cfg.ConfigOpts:
    """A private ConfigOpts with our options registered and ``overrides``
    applied to ``[scheduler_ext]`` (for tools and tests)."""
    conf = cfg.ConfigOpts()
    se_conf.register_opts(conf)
    conf([], project="scheduler-ext", default_config_files=[])
    for key, value in overrides.items():
        conf.set_override(key, value, group="scheduler_ext")
    return conf


class Driver(Protocol):
    """What a ``scheduler_ext.driver`` plugin offers (the nova adapter
    builds one with ``(client, conf, weighing=...)`` and calls this)."""

    client: PlacementClient
    #: the options it was built with (the adapter reads
    #: ``[scheduler_ext] nova_host_limit`` from them)
    conf: cfg.ConfigOpts

    def refresh(self) -> None:
        """Bring the view up to date ahead of a decision (the adapter starts
        it as a request arrives, then passes ``refreshed=True``)."""

    def select_destinations(self, request: ScheduleRequest,
                            max_alternates: int | None = None,
                            ranking: Ranking | None = None, *,
                            refreshed: bool = False
                            ) -> list[list[Candidate]]:
        """Claim a host per instance (see ``SchedulerDriver``)."""

    def read_consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        """What one consumer holds in placement."""

    def holder_root(self, allocs: Allocations) -> str | None:
        """The one root the non-sharing providers of ``allocs`` belong to,
        or None when the driver cannot tell."""


def load_driver(client: PlacementClient, conf: cfg.ConfigOpts,
                weighing: Weighing = DEFAULT_WEIGHING) -> Driver:
    """The driver named by ``[scheduler_ext] driver``, built with
    ``(client, conf, weighing=weighing)``."""
    cls = load_plugin(DRIVER_NAMESPACE, conf.scheduler_ext.driver, "driver")
    driver: Driver = cls(client, conf, weighing=weighing)
    return driver


class SchedulerDriver:
    """Choose and claim hosts for ScheduleRequests; the candidate sources
    order hosts by ``weighing``."""

    def __init__(self, client: PlacementClient, conf: cfg.ConfigOpts | None = None,
                 weighing: Weighing = DEFAULT_WEIGHING):
        self.conf = conf or make_conf()
        opts = self.conf.scheduler_ext
        self.client = client
        plugin: SourcePlugin = load_plugin(SOURCE_NAMESPACE, opts.engine, "engine")
        strategy_cls = load_plugin(STRATEGY_NAMESPACE, opts.move_strategy,
                                   "move_strategy")
        #: what the source answers from, kept up to date (the engine's
        #: ``FleetView``): the one object the driver refreshes and reads
        #: through, and the strategy tells of its writes
        self.upkeep, self.source = plugin.build(client, self.conf,
                                                weighing=weighing)
        self.strategy = self._strategy(strategy_cls, self.source, self.upkeep)
        # queries the source cannot answer exactly go to placement itself
        self.fallback = None
        if opts.engine != FALLBACK_SOURCE and isinstance(client, CandidatesEndpoint):
            fallback: SourcePlugin = load_plugin(SOURCE_NAMESPACE, FALLBACK_SOURCE,
                                                 "engine")
            # (with its own upkeep, which keeps nothing)
            fb_upkeep, fb_source = fallback.build(client, self.conf,
                                                  weighing=weighing)
            self.fallback = self._strategy(strategy_cls, fb_source, fb_upkeep)

    def _strategy(self, strategy_cls: Any, source: CandidateSource,
                  upkeep: FleetUpkeep) -> Any:
        opts = self.conf.scheduler_ext
        return strategy_cls(
            self.client, source, upkeep,
            max_claim_attempts=opts.max_claim_attempts,
            prefer_same_host=opts.prefer_same_host)

    def refresh(self) -> None:
        """Bring the upkeep's view up to date (every increase placement
        has taken so far); what ``select_destinations`` does first unless
        its caller says it has."""
        self.upkeep.refresh()

    def select_destinations(self, request: ScheduleRequest,
                            max_alternates: int | None = None,
                            ranking: Ranking | None = None, *,
                            refreshed: bool = False
                            ) -> list[list[Candidate]]:
        """Claim a host per instance; raises NoValidHost (nothing written)
        or InvalidRequest (nothing written). ``max_alternates``: alternates
        per instance (the strategy's default, 2, when None); ``ranking`` (nova's host
        filters and weighers, for instance) filters and orders the
        candidates of this call; ``refreshed``: the caller ran ``refresh``
        after this request arrived (and no other decision since), so the
        view is not refreshed again."""
        move = request.move
        if move is not None and not (
                move.migration_held is not None and
                move.source_root in move.migration_held.allocations):
            # (placement itself named the source when it holds the
            # migration's allocations there: no read needed)
            try:
                self.client.get_provider(move.source_root)
            except errors.NotFound:
                raise errors.InvalidRequest(
                    f"move.source_root={move.source_root!r}: no such "
                    "provider in placement", field="move.source_root",
                    value=move.source_root) from None
        if not refreshed:
            self.upkeep.refresh()
        try:
            return self.strategy.select(request, max_alternates, ranking)
        except errors.Unsupported as exc:
            if self.fallback is None:
                raise
            LOG.info("engine cannot answer (%s); asking placement", exc)
            return self.fallback.select(request, max_alternates, ranking)
        finally:
            self.upkeep.after_decision()

    __call__ = select_destinations

    def read_consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        """What one consumer holds (GET /allocations/{consumer}), through the
        upkeep (the engine's view with the sql source: one statement on
        placement's database; otherwise the placement client)."""
        return self.upkeep.consumer(consumer_uuid)

    def holder_root(self, allocs: Allocations) -> str | None:
        """The one root (a compute node) the non-sharing providers of
        ``allocs`` belong to, as the upkeep's view knows it (``root_of``);
        None when there is no view or it cannot tell."""
        return self.upkeep.root_of(allocs)


if TYPE_CHECKING:       # mypy checks the class against the declared contract
    _IS_A_DRIVER: type[Driver] = SchedulerDriver
