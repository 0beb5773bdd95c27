"""``scheduler-ext audit``: check a placement against the invariants, and
reconcile move allocations against what nova knows.

Without ``--instances`` it checks placement alone: usage equals the sum of
the consumers' allocations and stays within capacity on every provider, and
lists migration consumers that still hold allocations. With ``--instances
FILE`` (JSON written by the nova adapter, or by hand: a list of instances
with ``uuid``, ``host``, ``resources``, ``project_id``, ``user_id`` and
``moves``) it also runs reconcile: a dry run that prints each fix, or with
``--apply`` one atomic write per fix.
"""

from __future__ import annotations

import argparse
import json

from oslo_config import cfg

from scheduler_ext import conf as se_conf
from scheduler_ext import errors
from scheduler_ext.lab import invariants
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.moves.reconcile import Reconciler, load_instances


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--placement-url",
                       help="a placement with auth_strategy=noauth2 "
                            "(tests, labs)")
    where.add_argument("--config-file", action="append",
                       help="nova.conf: placement is reached with its "
                            "[placement] options (repeatable)")
    parser.add_argument("--instances", type=argparse.FileType("r"),
                        help="JSON list of instances and their moves; "
                             "enables reconcile")
    parser.add_argument("--apply", action="store_true",
                        help="write the reconcile fixes (default: dry run)")


def _client(args: argparse.Namespace):
    if args.placement_url:
        return HttpPlacement.from_url(args.placement_url)
    conf = cfg.ConfigOpts()
    se_conf.register_opts(conf)
    conf([], project="nova", default_config_files=args.config_file)
    return HttpPlacement.from_conf(conf)


def run(args: argparse.Namespace) -> int:
    client = _client(args)
    problems = invariants.check_providers(client)
    for p in problems:
        print(f"provider: {p}")
    leftovers = 0
    for prov in client.list_providers():
        for consumer in client.get_provider_allocations(prov.uuid):
            if client.get_consumer(consumer).consumer_type == "MIGRATION":
                leftovers += 1
                print(f"migration {consumer} holds allocations on {prov.name}")
    fixes = []
    if args.instances:
        try:
            data = json.load(args.instances)
        except ValueError as exc:
            raise errors.InvalidRequest(f"--instances: not JSON: {exc}",
                                        field="instances", value=args.instances.name)
        fixes = Reconciler(client).run(load_instances(data), apply=args.apply)
        for f in fixes:
            state = ("applied" if f.applied else
                     f"FAILED: {f.error}" if f.error else "would apply")
            print(f"instance {f.instance_uuid}: {f.reason} [{state}]")
    print(f"{len(problems)} provider problems, {leftovers} migration "
          f"allocations, {len(fixes)} reconcile fixes"
          + ("" if args.apply or not fixes else " (dry run: --apply writes them)"))
    failed = [f for f in fixes if f.error]
    return 1 if problems or failed or (fixes and not args.apply) else 0

