"""``scheduler-ext evacuate``: the quorum-safe evacuation planner on a real
cloud, one tick per run (run ``run`` from a timer).

* ``plan``: read nova's compute services and servers, the storage reports
  and the storage cluster's view, and print what the planner would do now
  (nothing is written, the state file included).
* ``run``: the same, then evacuate through nova's API, print the fence
  steps for the operator's fencing (nova has no fencing API; a fenced host
  is confirmed by forcing its compute service down), and save the
  planner's state.

Exit 1 when the tick raised an alert.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from scheduler_ext.cmd import storage as storage_cmd
from scheduler_ext.storage import evacuation, evacuation_run
from scheduler_ext.storage.errors import StorageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="evacuate_command", required=True)
    for name, help_text in (
            ("plan", "print what the planner would do now (writes nothing)"),
            ("run", "evacuate through nova's API, print the fence steps, "
                    "save the state")):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--reports", nargs="+", required=True,
                       help="storage reports (JSON of 'storage discover') of "
                            "the compute hosts")
        p.add_argument("--state", required=True,
                       help="the planner's state file (created on the first "
                            "run)")
        p.add_argument("--storage-view",
                       help='the members of the storage cluster: {"quorum": '
                            '[hosts], "down": [hosts]}')
        storage_cmd.add_compute_arguments(p)
        p.set_defaults(evacuate_apply=name == "run")


def _state(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise StorageError(f"--state {path}: cannot read ({exc})") from None


def run(args: argparse.Namespace) -> int:
    reports = {r.host: r for r in storage_cmd.load_reports(args.reports)}
    view_text = storage_cmd.read_file(args.storage_view)
    view = (evacuation_run.storage_view(view_text, args.storage_view)
            if view_text is not None else None)
    policy = evacuation.policy_from_conf(storage_cmd.load_conf(args.config_file))
    api = storage_cmd.compute_endpoint(args)
    try:
        result = evacuation_run.tick(api, reports, policy, time.time(),
                                     _state(args.state), view)
    except ValueError as exc:
        raise StorageError(f"--state {args.state}: {exc}") from None
    for note in result.notes:
        print(f"note: {note}")
    verb = "" if args.evacuate_apply else "would "
    for a in result.actions:
        what = (f"{verb}evacuate {a.instance} from {a.host} to {a.destination}"
                if a.kind == "evacuate" else f"{a.kind} {a.host}: {a.reason}")
        print(what)
    if args.evacuate_apply:
        for step in evacuation_run.execute(api, result.actions):
            print(f"operator: {step}")
        tmp = f"{args.state}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result.state, f, indent=2, sort_keys=True)
        os.replace(tmp, args.state)
    if not result.actions:
        print("nothing to do")
    return 1 if any(a.kind == "alert" for a in result.actions) else 0
