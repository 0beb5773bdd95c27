"""What ``scheduler-ext audit`` reads before it does anything: the
placement it is pointed at, nova.conf's ``[placement]``, and the instances
file. Every problem is a ``UsageError`` naming the flag or file.

The instances file (``--instances``, written by ``--export``) is a JSON
list, one object per instance::

    [{"uuid": "...", "host": "<compute node provider uuid>",
      "resources": {"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 40},
      "project_id": "...", "user_id": "...",
      "moves": [{"migration_uuid": "...", "source": "<provider uuid>",
                 "dest": "<provider uuid>", "old_resources": {...},
                 "new_resources": {...}, "in_progress": true}]}]

A finished move may leave ``source``, ``dest`` and the resources empty;
``moves`` lists every resize and cold migration, oldest first.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from scheduler_ext import conf as se_conf
from scheduler_ext import errors
from scheduler_ext.cmd.common import UsageError, read_text
from scheduler_ext.moves.reconcile import InstanceState, load_instances
from scheduler_ext.placement import validation
from scheduler_ext.placement.http import HttpPlacement


def placement_url(url: str) -> HttpPlacement:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--placement-url {url}: not an http:// or https:// URL")
    try:
        parts.port
    except ValueError:
        raise UsageError(f"--placement-url {url}: the port is not a number") from None
    return HttpPlacement.from_url(url)


def nova_conf(files: list[str]) -> cfg.ConfigOpts:
    """nova.conf parsed with our options and ``[placement]``."""
    for path in files:
        if not os.path.exists(path):
            raise UsageError(f"--config-file {path}: no such file")
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


def placement_from_conf(conf: cfg.ConfigOpts, files: list[str]) -> HttpPlacement:
    """A client from ``[placement]``; UsageError when that section cannot
    reach placement (no auth and no endpoint, an unknown auth_type, a
    plugin's missing options)."""
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
        raise UsageError(f"{where}: {exc}") from None
    if auth is None and not conf.placement.endpoint_override:
        raise UsageError(f"{where} sets neither auth_type nor endpoint_override: "
                         "nothing to reach placement with")
    try:
        return HttpPlacement.from_conf(conf)
    except (cfg.Error, ValueError, ks_exc.ClientException) as exc:
        raise UsageError(f"{where}: {exc}") from None


def _uuid(value: Any, where: str, allow_empty: bool = False) -> None:
    if allow_empty and value == "":
        return
    try:
        validation.uuid(value, where)
    except errors.InvalidRequest:
        raise UsageError(f"{where}: not a UUID: {value!r}") from None


def _resources(value: Any, where: str, allow_empty: bool = False) -> None:
    if not isinstance(value, dict) or (not value and not allow_empty):
        raise UsageError(f"{where}: must be an object of resource class to "
                         f"amount, got {value!r}")
    for rc, n in value.items():
        try:
            validation.resource_class(rc)
        except errors.InvalidRequest:
            raise UsageError(f"{where}: {rc!r} is not a resource class") from None
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise UsageError(f"{where}.{rc}: must be a positive integer, got {n!r}")


def _instance(i: int, d: Any, where: str) -> None:
    here = f"{where}: entry {i}"
    if not isinstance(d, dict):
        raise UsageError(f"{here}: must be an object, got {d!r}")
    for key in ("uuid", "host", "resources", "project_id", "user_id"):
        if key not in d:
            raise UsageError(f"{here}: missing {key!r}")
    _uuid(d["uuid"], f"{here}: uuid")
    here = f"{where}: entry {i} ({d['uuid']})"
    _uuid(d["host"], f"{here}: host")
    _resources(d["resources"], f"{here}: resources")
    for key in ("project_id", "user_id"):
        if not isinstance(d[key], str) or not d[key]:
            raise UsageError(f"{here}: {key}: must be a non-empty string")
    moves = d.get("moves", [])
    if not isinstance(moves, list):
        raise UsageError(f"{here}: moves: must be a list")
    for k, m in enumerate(moves):
        at = f"{here}: moves[{k}]"
        if not isinstance(m, dict):
            raise UsageError(f"{at}: must be an object")
        for key in ("migration_uuid", "source", "dest", "old_resources",
                    "new_resources", "in_progress"):
            if key not in m:
                raise UsageError(f"{at}: missing {key!r}")
        if not isinstance(m["in_progress"], bool):
            raise UsageError(f"{at}: in_progress: must be true or false")
        done = not m["in_progress"]
        _uuid(m["migration_uuid"], f"{at}: migration_uuid")
        _uuid(m["source"], f"{at}: source", allow_empty=done)
        _uuid(m["dest"], f"{at}: dest", allow_empty=done)
        _resources(m["old_resources"], f"{at}: old_resources", allow_empty=done)
        _resources(m["new_resources"], f"{at}: new_resources", allow_empty=done)


def instances_file(path: str) -> list[InstanceState]:
    """The instances of an ``--instances`` file, every entry checked."""
    where = f"--instances {path}"
    text = read_text(path, "--instances")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{where}: not JSON: {exc}") from None
    if not isinstance(data, list):
        raise UsageError(f"{where}: must be a JSON list of instances, got "
                         f"{type(data).__name__} {json.dumps(data)[:60]}")
    for i, d in enumerate(data):
        _instance(i, d, where)
    return load_instances(data)
