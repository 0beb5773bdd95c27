"""oslo.config options of scheduler-ext, one module per option group."""

from __future__ import annotations

from oslo_config import cfg

from scheduler_ext.conf import placement, scheduler_ext, storage

_MODULES = (scheduler_ext, placement, storage)


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register every group on ``conf`` (idempotent)."""
    for module in _MODULES:
        module.register_opts(conf)


def list_opts() -> list[tuple[str, list]]:
    """(group, options) pairs for oslo-config-generator."""
    return [pair for module in _MODULES for pair in module.list_opts()]
