"""How every sub-command reaches placement: one path, one error per thing
that can be wrong.

Where placement is, first match wins:

1. ``--placement-url URL``: a placement with ``auth_strategy = noauth2``
   (labs, tests);
2. ``--os-cloud CLOUD``: a cloud of ``clouds.yaml``, read by openstacksdk's
   config as every OpenStack client reads it (``OS_*`` variables apply);
3. ``--config-file nova.conf``: its ``[placement]`` section, through
   keystoneauth1's own loaders, as nova reads it;
4. ``OS_CLOUD`` or ``OS_AUTH_URL`` in the environment (openstacksdk's
   config again).

Before the first placement request the credentials are used once (a token,
the catalog's placement endpoint), so keystone's problems read as
keystone's: unreachable (exit 3), refused credentials, no placement in the
catalog (exit 2). Placement's own problems read as placement's.
"""

from __future__ import annotations

import argparse
import os
import urllib.parse

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from scheduler_ext import conf as se_conf
from scheduler_ext.cmd.common import Unreachable, UsageError, read_text, setting_problem
from scheduler_ext.placement.http import HttpPlacement, unreachable_reason


def add_arguments(parser: argparse.ArgumentParser, config_help: str) -> None:
    """--placement-url, --os-cloud and --config-file (repeatable)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--placement-url", metavar="URL",
                       help="a placement with auth_strategy = noauth2 (labs, "
                            "tests)")
    where.add_argument("--os-cloud", metavar="CLOUD",
                       help="a cloud of clouds.yaml (openstacksdk's config; "
                            "OS_* variables apply; default: $OS_CLOUD when "
                            "neither this nor --config-file is given)")
    parser.add_argument("--config-file", action="append", default=[],
                        metavar="NOVA_CONF", help=config_help)


def placement_url(url: str) -> HttpPlacement:
    """A client for ``--placement-url`` (checked: http(s), a host, a port)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--placement-url {url}: not an http:// or https:// URL")
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"--placement-url {url}: the port must be a number "
                         "from 1 to 65535") from None
    if port == 0:
        raise UsageError(f"--placement-url {url}: the port must be a number "
                         "from 1 to 65535")
    return HttpPlacement.from_url(url)


def nova_conf(files: list[str]) -> cfg.ConfigOpts:
    """nova.conf parsed with our options and ``[placement]``."""
    for path in files:
        if not os.path.exists(path):
            raise UsageError(f"--config-file {path}: no such file")
        if os.path.isdir(path):
            raise UsageError(f"--config-file {path}: a directory, not a file")
        read_text(path, "--config-file")      # readable, UTF-8
    conf = cfg.ConfigOpts()
    se_conf.register_opts(conf)
    try:
        conf([], project="nova", default_config_files=files)
    except cfg.ConfigFilesNotFoundError as exc:
        raise UsageError(f"--config-file {', '.join(exc.config_files)}: "
                         "cannot be read") from None
    except cfg.ConfigFileParseError as exc:
        raise UsageError(f"--config-file {exc.config_file}: not an INI file: "
                         f"{exc.msg}") from None
    return conf


def _from_conf(conf: cfg.ConfigOpts, files: list[str]) -> HttpPlacement:
    """A client from ``[placement]``: keystoneauth1's loaders."""
    where = f"--config-file {', '.join(files)}: [placement]"
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, "placement")
    except ks_exc.NoMatchingPlugin as exc:
        raise UsageError(f"{where} auth_type = {exc.name}: no such keystoneauth "
                         "plugin (nova uses password, v3password, token, "
                         "admin_token...)") from None
    except ks_exc.MissingRequiredOptions as exc:
        names = ", ".join(o.dest for o in exc.options)
        raise UsageError(f"{where} auth_type = {conf.placement.auth_type} needs "
                         f"{names}") from None
    except (cfg.Error, ValueError) as exc:
        raise UsageError(f"{where} {setting_problem(exc)}") from None
    if auth is None and not conf.placement.endpoint_override:
        raise UsageError(f"{where} sets neither auth_type nor endpoint_override: "
                         "nothing to reach placement with")
    try:
        session = ks_loading.load_session_from_conf_options(conf, "placement",
                                                            auth=auth)
        adapter = ks_loading.load_adapter_from_conf_options(
            conf, "placement", session=session, auth=auth)
    except (cfg.Error, ValueError) as exc:
        raise UsageError(f"{where} {setting_problem(exc)}") from None
    return _checked(adapter, where)


def _from_cloud(name: str | None, where: str) -> HttpPlacement:
    """A client from openstacksdk's config (clouds.yaml, OS_*)."""
    from openstack import config as os_config
    from openstack import exceptions as os_exc
    try:
        region = os_config.OpenStackConfig().get_one(cloud=name)
        session = region.get_session()
    except os_exc.ConfigException as exc:
        raise UsageError(f"{where}: {exc}") from None
    except ks_exc.MissingRequiredOptions as exc:
        names = ", ".join(o.dest for o in exc.options)
        raise UsageError(f"{where}: the auth plugin needs {names}") from None
    except ks_exc.NoMatchingPlugin as exc:
        raise UsageError(f"{where}: auth_type {exc.name}: no such keystoneauth "
                         "plugin") from None
    adapter = ks_adapter.Adapter(
        session, service_type="placement",
        interface=region.get_interface("placement"),
        region_name=region.get_region_name("placement"),
        endpoint_override=region.get_endpoint("placement"),
        connect_retries=2)
    return _checked(adapter, where)


def _checked(adapter: ks_adapter.Adapter, where: str) -> HttpPlacement:
    """A client on ``adapter`` once its credentials were used (a token and
    the placement endpoint), so keystone's problems are named as keystone's."""
    try:
        endpoint = adapter.get_endpoint()
    except ks_exc.MissingAuthPlugin:
        raise UsageError(f"{where}: no auth plugin and no endpoint_override: "
                         "nothing to reach placement with") from None
    except ks_exc.MissingRequiredOptions as exc:
        names = ", ".join(o.dest for o in exc.options)
        raise UsageError(f"{where}: the auth plugin needs {names}") from None
    except (ks_exc.ConnectionError, ks_exc.RequestTimeout) as exc:
        raise Unreachable(f"{where}: keystone could not be reached: "
                          f"{unreachable_reason(exc)}") from None
    except ks_exc.Unauthorized as exc:
        raise UsageError(f"{where}: keystone refused the credentials "
                         f"(401): {exc.message}") from None
    except ks_exc.EndpointNotFound:
        raise UsageError(f"{where}: keystone's catalog lists no placement "
                         "endpoint for this region and interface") from None
    except ks_exc.ClientException as exc:
        raise UsageError(f"{where}: keystone answered: {exc}") from None
    if not endpoint:
        raise UsageError(f"{where}: keystone's catalog lists no placement "
                         "endpoint for this region and interface")
    return HttpPlacement(adapter)


def client(args: argparse.Namespace) -> HttpPlacement:
    """The placement client the flags and environment name (see the module
    doc for the order); UsageError or Unreachable naming what is wrong."""
    if args.placement_url:
        return placement_url(args.placement_url)
    if args.os_cloud:
        return _from_cloud(args.os_cloud, f"--os-cloud {args.os_cloud}")
    if args.config_file:
        return _from_conf(nova_conf(args.config_file), args.config_file)
    if os.environ.get("OS_CLOUD"):
        return _from_cloud(os.environ["OS_CLOUD"], f"OS_CLOUD={os.environ['OS_CLOUD']}")
    if os.environ.get("OS_AUTH_URL"):
        return _from_cloud(None, "the OS_* variables")
    raise UsageError("nothing says where placement is: give --placement-url, "
                     "--os-cloud (clouds.yaml), --config-file (nova.conf's "
                     "[placement]) or OS_CLOUD / OS_AUTH_URL")
