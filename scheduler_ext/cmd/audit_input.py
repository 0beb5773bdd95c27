"""The instances file ``scheduler-ext audit`` reads before it does
anything; every problem is a ``UsageError`` naming the file, the entry and
the field.

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
from typing import Any


from scheduler_ext import errors
from scheduler_ext.cmd.common import UsageError, read_text
from scheduler_ext.moves.reconcile import InstanceState, load_instances
from scheduler_ext.placement import validation


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
