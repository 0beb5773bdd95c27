"""The engine's weighing from nova's own ``[filter_scheduler]`` options.

The engine pre-selects the hosts nova's weighers then rank; it must weigh
as the operator configured nova (negative multipliers pack), so it reads
``ram_weight_multiplier``, ``cpu_weight_multiplier``,
``disk_weight_multiplier`` and ``host_subset_size`` where nova does. There
are no copies of them in ``[scheduler_ext]``.
"""

from __future__ import annotations

from oslo_config import cfg

from scheduler_ext.engine.weigh import Weigher, Weighing


def from_nova_conf(conf: cfg.ConfigOpts) -> Weighing:
    """``Weighing`` from ``conf.filter_scheduler`` (nova's configuration,
    with nova's options registered)."""
    opts = conf.filter_scheduler
    return Weighing(Weigher.nova(opts.ram_weight_multiplier,
                                 opts.cpu_weight_multiplier,
                                 opts.disk_weight_multiplier),
                    opts.host_subset_size)
