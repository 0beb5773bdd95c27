"""``[placement]``: how to reach placement, read the way nova reads it.

These are keystoneauth1's session, auth and adapter options, registered
under the same group nova uses, so an operator points scheduler-ext at the
same nova.conf.
"""

from __future__ import annotations

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

GROUP = "placement"


def register_opts(conf: cfg.ConfigOpts) -> None:
    ks_loading.register_session_conf_options(conf, GROUP)
    ks_loading.register_auth_conf_options(conf, GROUP)
    ks_loading.register_adapter_conf_options(conf, GROUP)
    conf.set_default("service_type", "placement", group=GROUP)
    conf.set_default("valid_interfaces", ["internal", "public"], group=GROUP)


def list_opts() -> list[tuple[str, list]]:
    opts = (ks_loading.get_session_conf_options()
            + ks_loading.get_auth_common_conf_options()
            + ks_loading.get_adapter_conf_options(include_deprecated=False))
    return [(GROUP, opts)]
