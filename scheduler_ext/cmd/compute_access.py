"""How the storage planners reach nova's compute API (``storage
live-migration``, ``evacuate``), first match wins:

1. ``--compute-url URL``: a compute API with ``auth_strategy = noauth2``
   (labs, tests);
2. ``--os-cloud CLOUD``: a cloud of ``clouds.yaml`` (openstacksdk's config;
   ``OS_*`` variables apply);
3. ``--config-file nova.conf``: the catalog's compute endpoint with the
   ``[placement]`` credentials nova itself uses (an admin user).
"""

from __future__ import annotations

import argparse
import urllib.parse

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc

from scheduler_ext.cmd import placement_access
from scheduler_ext.cmd.common import UsageError
from scheduler_ext.storage.compute_api import KeystoneCompute


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--compute-url", metavar="URL",
                       help="a compute API with auth_strategy = noauth2 "
                            "(labs, tests)")
    where.add_argument("--os-cloud", metavar="CLOUD",
                       help="a cloud of clouds.yaml (openstacksdk's config; "
                            "OS_* variables apply)")
    parser.add_argument("--config-file", action="append", default=[],
                        metavar="NOVA_CONF",
                        help="nova.conf: the compute API with [placement]'s "
                             "credentials (unless --os-cloud), options from "
                             "[storage] (repeatable)")


def endpoint(args: argparse.Namespace) -> KeystoneCompute:
    """The compute API the flags name; UsageError naming what is wrong."""
    if args.compute_url:
        parts = urllib.parse.urlsplit(args.compute_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--compute-url {args.compute_url}: not an "
                             "http:// or https:// URL")
        return KeystoneCompute.from_url(args.compute_url)
    if args.os_cloud:
        from openstack import config as os_config
        from openstack import exceptions as os_exc
        try:
            region = os_config.OpenStackConfig().get_one(cloud=args.os_cloud)
            session = region.get_session()
        except (os_exc.ConfigException, ks_exc.ClientException) as exc:
            raise UsageError(f"--os-cloud {args.os_cloud}: {exc}") from None
        return KeystoneCompute(ks_adapter.Adapter(
            session, service_type="compute",
            interface=region.get_interface("compute"),
            region_name=region.get_region_name("compute")))
    if args.config_file:
        return KeystoneCompute.from_conf(
            placement_access.nova_conf(args.config_file))
    raise UsageError("nothing says where nova's compute API is: give "
                     "--compute-url, --os-cloud or --config-file (nova.conf)")
