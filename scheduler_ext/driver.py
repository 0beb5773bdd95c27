"""The scheduler driver core (nova-free).

``SchedulerDriver`` loads its candidate engine and its move strategy through
stevedore, by the names in ``[scheduler_ext]``, and answers
``select_destinations``: for each instance the claimed Selection, then up to
``max_alternates`` alternates.
"""

from __future__ import annotations

from typing import Callable

from oslo_config import cfg
from oslo_log import log as logging
from stevedore import driver as sd_driver

from scheduler_ext import conf as se_conf
from scheduler_ext import errors
from scheduler_ext.placement import PlacementClient
from scheduler_ext.placement_source import PlacementCandidateSource
from scheduler_ext.request import ScheduleRequest
from scheduler_ext.strategy import CandidateSource, Selection

LOG = logging.getLogger(__name__)

ENGINE_NAMESPACE = "scheduler_ext.engine"
STRATEGY_NAMESPACE = "scheduler_ext.move_strategy"


def _load(namespace: str, name: str):
    try:
        return sd_driver.DriverManager(namespace, name).driver
    except (RuntimeError, ImportError) as exc:
        raise errors.InvalidRequest(
            f"no {namespace} plugin named {name!r}: {exc}",
            field=namespace, value=name) from exc


def make_conf(**overrides) -> cfg.ConfigOpts:
    """A private ConfigOpts with our options registered and ``overrides``
    applied to ``[scheduler_ext]`` (for tools and tests)."""
    conf = cfg.ConfigOpts()
    se_conf.register_opts(conf)
    conf([], project="scheduler-ext", default_config_files=[])
    for key, value in overrides.items():
        conf.set_override(key, value, group="scheduler_ext")
    return conf


class SchedulerDriver:
    """Choose and claim hosts for ScheduleRequests."""

    def __init__(self, client: PlacementClient, conf: cfg.ConfigOpts | None = None):
        self.conf = conf or make_conf()
        opts = self.conf.scheduler_ext
        self.client = client
        engine_cls = _load(ENGINE_NAMESPACE, opts.engine)
        strategy_cls = _load(STRATEGY_NAMESPACE, opts.move_strategy)
        self.source = engine_cls(client, self.conf)
        self.strategy = self._strategy(strategy_cls, self.source)
        # queries the engine cannot answer exactly go to placement itself
        self.fallback = None
        if not isinstance(self.source, PlacementCandidateSource) and \
                hasattr(client, "allocation_candidates"):
            self.fallback = self._strategy(
                strategy_cls, PlacementCandidateSource(client, self.conf))

    def _strategy(self, strategy_cls, source):
        opts = self.conf.scheduler_ext
        return strategy_cls(
            self.client, source, max_alternates=opts.max_alternates,
            max_claim_attempts=opts.max_claim_attempts,
            prefer_same_host=opts.prefer_same_host)

    @property
    def strategies(self) -> list:
        """The strategy in use, then the one asking placement (if any)."""
        return [self.strategy] + ([self.fallback] if self.fallback else [])

    def wrap_sources(self, wrap: Callable[[CandidateSource], CandidateSource]
                     ) -> list[CandidateSource]:
        """Put ``wrap(source)`` in front of every candidate source, e.g. a
        layer running nova's host filters and weighers over the engine's
        candidates; returns the wrappers."""
        out = []
        for strategy in self.strategies:
            strategy.source = wrap(strategy.source)
            out.append(strategy.source)
        return out

    def select_destinations(self, request: ScheduleRequest,
                            max_alternates: int | None = None
                            ) -> list[list[Selection]]:
        """Claim a host per instance; raises NoValidHost (nothing written)
        or InvalidRequest (nothing written). ``max_alternates`` overrides
        the configured number for this call."""
        if request.move is not None:
            try:
                self.client.get_provider(request.move.source_root)
            except errors.NotFound:
                raise errors.InvalidRequest(
                    f"move.source_root={request.move.source_root!r}: no such "
                    "provider in placement", field="move.source_root",
                    value=request.move.source_root) from None
        refresh = getattr(self.source, "refresh", None)
        if refresh is not None:
            refresh()
        try:
            return self.strategy.select(request, max_alternates)
        except errors.Unsupported as exc:
            if self.fallback is None:
                raise
            LOG.info("engine cannot answer (%s); asking placement", exc)
            return self.fallback.select(request, max_alternates)

    __call__ = select_destinations
