"""The engine's weighing from nova's own ``[filter_scheduler]`` options.

The engine pre-selects the hosts nova's weighers then rank; it must weigh
as the operator configured nova (negative multipliers pack), so it reads
``ram_weight_multiplier``, ``cpu_weight_multiplier`` and
``disk_weight_multiplier`` where nova does. There are no copies of them
in ``[scheduler_ext]``. ``host_subset_size`` (and its shuffle) is applied
once, by nova's ranking over nova's own weights (``ranking.NovaRanking``):
the engine's pre-selection draws nothing.
"""

from __future__ import annotations

from oslo_config import cfg

from scheduler_ext.engine.weigh import Weigher, Weighing


def from_nova_conf(conf: cfg.ConfigOpts) -> Weighing:
    """``Weighing`` from ``conf.filter_scheduler`` (nova's configuration,
    with nova's options registered); no subset draw (nova's ranking
    draws)."""
    opts = conf.filter_scheduler
    return Weighing(Weigher.nova(opts.ram_weight_multiplier,
                                 opts.cpu_weight_multiplier,
                                 opts.disk_weight_multiplier))
