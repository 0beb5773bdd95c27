"""``scheduler-ext evacuate plan|run``: the quorum-safe evacuation planner
on a real cloud, one tick per run (run ``evacuate run`` from a timer).

* ``evacuate plan``: read nova's compute services and servers, the storage
  reports and the storage cluster's view, and list what the planner would
  do now (nothing is written, the state file included).
* ``evacuate run``: the same, then evacuate through nova's API, run the
  ladder steps with ``--fence-command`` (or list them for the operator:
  nova has no fencing API; a fenced host is confirmed by forcing its
  compute service down), and save the planner's state.

Exit 1 when the tick raised an alert or an evacuation failed (nova refused
it, or a later tick found the server still on its fenced host): it is
retried on a later tick up to ``[storage] evacuation_attempts`` times.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from typing import Any, Sequence

from scheduler_ext.cmd import base, common, compute_access, placement_access
from scheduler_ext.cmd import storage as storage_cmd
from scheduler_ext.storage import (
    compute_api, evacuation_disk, evacuation_run, fencing_policy)
from scheduler_ext.storage.errors import StorageError


def _state(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    try:
        data = json.loads(common.read_text(path, "--state"))
    except ValueError as exc:
        raise StorageError(f"--state {path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise StorageError(f"--state {path}: not a planner state")
    return data


class CommandFencer:
    """An ``evacuation_run.Fencer`` running the operator's command (no
    shell; 120 s at most)."""

    TIMEOUT = 120.0

    def __init__(self, template: str):
        try:
            self.argv = shlex.split(template)
        except ValueError as exc:
            raise common.UsageError(f"--fence-command: {exc}") from None
        if not self.argv:
            raise common.UsageError("--fence-command: empty")

    def __call__(self, step: str, host: str) -> str:
        argv = [a.replace("{step}", step).replace("{host}", host)
                for a in self.argv]
        try:
            done = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=self.TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            return f"{argv[0]} did not finish within {self.TIMEOUT:g} s"
        except OSError as exc:
            return f"{argv[0]}: {exc.strerror}"
        said = (done.stdout or done.stderr).strip().splitlines()
        return f"{argv[0]} exited {done.returncode}" + (
            f": {said[-1][:200]}" if said else "")


def _disks(args: argparse.Namespace, api: compute_api.ComputeEndpoint
           ) -> evacuation_disk.DiskPlacement | None:
    """Placement's view of the servers' disks, when placement is reachable
    by the flags (a lab's --compute-url needs --placement-url)."""
    if not args.placement_url and (args.compute_url or not (
            args.os_cloud or args.config_file)):
        return None
    return evacuation_disk.PlacementDisk(placement_access.client(args), api)


TICK_COLUMNS = ("action", "host", "what")


class _Tick(base.Lister):
    apply = False

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--reports", nargs="+", required=True,
                            help="storage reports (JSON of 'storage "
                                 "discover') of the compute hosts")
        parser.add_argument("--state", required=True,
                            help="the planner's state file (created by the "
                                 "first run)")
        parser.add_argument("--storage-view", metavar="FILE",
                            help='the members of the storage cluster: '
                                 '{"quorum": [hosts], "down": [hosts]}')
        compute_access.add_arguments(parser)
        parser.add_argument(
            "--placement-url", metavar="URL",
            help="placement with auth_strategy = noauth2 (labs, tests; "
                 "otherwise placement is reached like the compute API, from "
                 "--os-cloud or --config-file): which servers hold their "
                 "DISK_GB on a sharing provider, and which compute nodes "
                 "offer DISK_GB")
        if self.apply:
            parser.add_argument(
                "--fence-command", metavar="TEMPLATE",
                help="run for each ladder step, {step} and {host} filled in "
                     "(e.g. '/usr/local/bin/fence {step} {host}'); without "
                     "it the steps are listed for the operator. A fence "
                     "counts once the host's compute service is forced down")

    def planned_columns(self, parsed_args: argparse.Namespace) -> Sequence[str]:
        return TICK_COLUMNS

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        args = parsed_args
        reports = {r.host: r for r in storage_cmd.load_reports(args.reports)}
        view_text = storage_cmd.read_file(args.storage_view, "--storage-view")
        view = (evacuation_run.storage_view(
            view_text, f"--storage-view {args.storage_view}")
            if view_text is not None else None)
        policy = fencing_policy.policy_from_conf(
            storage_cmd.load_conf(args.config_file))
        api = compute_access.endpoint(args)
        try:
            result = evacuation_run.tick(api, reports, policy, time.time(),
                                         _state(args.state), view,
                                         _disks(args, api))
        except ValueError as exc:
            raise StorageError(f"--state {args.state}: {exc}") from None
        for note in result.notes:
            print(f"note: {note}", file=sys.stderr)
        if self.apply:
            fencer = (CommandFencer(args.fence_command) if args.fence_command
                      else None)
            for line in evacuation_run.execute(api, result, fencer):
                print(f"{'fence' if fencer else 'operator'}: {line}",
                      file=sys.stderr)
            common.write_json(args.state, result.state)
        rows = [self._row(a) for a in result.actions]
        if not result.actions:
            print("nothing to do", file=sys.stderr)
        if any(a.kind in ("alert", "evacuation-failed")
               for a in result.actions):
            self.exit_code = common.FINDINGS
        return TICK_COLUMNS, rows

    def _row(self, a: evacuation_run.Action) -> tuple[str, str, str]:
        if a.kind == "evacuate":
            return ("evacuate" if self.apply else "would evacuate", a.host,
                    f"{a.instance} to {a.destination or 'a host nova chooses'}"
                    + (f" ({a.reason})" if a.reason != "fence confirmed"
                       else ""))
        return (a.kind, a.host, a.reason)


class EvacuatePlan(_Tick):
    """list what the quorum-safe evacuation planner would do now (writes nothing)"""


class EvacuateRun(_Tick):
    """one tick of the evacuation planner: evacuate through nova's API, list the fence steps, save the state"""

    apply = True
