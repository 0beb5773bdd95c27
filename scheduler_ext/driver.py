"""The scheduler driver core (nova-free).

``SchedulerDriver`` loads its candidate engine and its move strategy through
stevedore, by the names in ``[scheduler_ext]``, and answers
``select_destinations``: for each instance the claimed Selection, then up to
``max_alternates`` alternates.
"""

from __future__ import annotations

from oslo_config import cfg
from stevedore import driver as sd_driver

from scheduler_ext import conf as se_conf
from scheduler_ext import errors
from scheduler_ext.placement import PlacementClient
from scheduler_ext.request import ScheduleRequest
from scheduler_ext.strategy import Selection

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
        self.strategy = strategy_cls(
            client, self.source, max_alternates=opts.max_alternates,
            max_claim_attempts=opts.max_claim_attempts,
            prefer_same_host=opts.prefer_same_host)

    def select_destinations(self, request: ScheduleRequest) -> list[list[Selection]]:
        """Claim a host per instance; raises NoValidHost (nothing written)
        or InvalidRequest (nothing written)."""
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
        return self.strategy.select(request)

    __call__ = select_destinations
