"""``scheduler-ext storage``: shared storage from the real topology.

* ``discover``: on a compute host, report where its instances path lives
  (mount, filesystem class, storage domain, size, the hosts that share the
  directory) as JSON on stdout. It writes the domain token and this host's
  marker into a shared directory unless ``--read-only``. Exit 0 for a
  ``shared`` or ``local`` path, 1 for a ``lost-mount`` or ``unconfirmed``
  one (the report is printed either way), 2 for bad input, a path that
  does not exist, or a hung filesystem.
* ``migrate-disk``: move the DISK_GB allocations nova left on compute
  nodes in a sharing aggregate to the sharing provider (dry run unless
  ``--apply``), and say which nova setting keeps it so. Exit 1 if a
  consumer could not be moved (it is left as it was).
* ``sync``: read every host's report, build one sharing provider per
  filesystem and show (dry run, the default) or ``--apply`` the writes
  that make placement match; ``--prune`` also plans the removals. A second
  run writes nothing. Exit 1 if the plan is refused (it would shrink
  inventory below what is allocated).
"""

from __future__ import annotations

import argparse
import os
import socket

from oslo_config import cfg

from scheduler_ext import conf as se_conf
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.storage import diskmigration
from scheduler_ext.storage import discover as se_discover
from scheduler_ext.storage import identity
from scheduler_ext.storage import report as se_report
from scheduler_ext.storage import sync as se_sync
from scheduler_ext.storage import topology
from scheduler_ext.storage.errors import ReportError, StorageError
from scheduler_ext.storage.probe import Probe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="storage_command", required=True)
    d = sub.add_parser("discover", help="print this host's storage report",
                       description="print this host's storage report (JSON)")
    d.add_argument("--path", help="instances path (default: [storage] "
                                  "instances_path, /var/lib/nova/instances)")
    d.add_argument("--host", default=socket.gethostname(),
                   help="this compute node's name in placement (nova's "
                        "hypervisor_hostname; default: the host name)")
    d.add_argument("--mountinfo", default="/proc/self/mountinfo",
                   help="mount table to read (default: /proc/self/mountinfo)")
    d.add_argument("--fstab", default="/etc/fstab",
                   help="fstab listing the mounts that should be there "
                        "(default: /etc/fstab; a missing file is empty)")
    d.add_argument("--expect-shared", action="store_true",
                   help="the path must be on shared storage: a local answer "
                        "is reported as a lost mount")
    d.add_argument("--read-only", action="store_true",
                   help="write no token: a report that cannot be confirmed "
                        "across hosts")
    d.add_argument("--config-file", action="append", default=[],
                   help="nova.conf with [storage] options (repeatable)")
    d.set_defaults(storage_handler=run_discover)
    s = sub.add_parser("sync", help="apply the hosts' reports to placement",
                       description="build sharing providers from host "
                                   "reports; dry run unless --apply")
    s.add_argument("reports", nargs="+", help="report files (JSON) from "
                                              "'storage discover'")
    where = s.add_mutually_exclusive_group(required=True)
    where.add_argument("--placement-url",
                       help="a placement with auth_strategy=noauth2 (labs)")
    where.add_argument("--config-file", action="append",
                       help="nova.conf: placement from [placement], options "
                            "from [storage] (repeatable)")
    s.add_argument("--apply", action="store_true",
                   help="write the changes (default: dry run)")
    s.add_argument("--prune", action="store_true",
                   help="also plan removals: hosts whose report says local or "
                        "lost-mount, names another filesystem, or is missing "
                        "leave our aggregates; sharing providers no report "
                        "names are deleted if they hold no allocations (one "
                        "read per provider)")
    s.add_argument("--check-strays", action="store_true",
                   help="also warn about hosts in our aggregates that no "
                        "report lists (one read per provider)")
    s.set_defaults(storage_handler=run_sync)
    g = sub.add_parser(
        "migrate-disk",
        help="move DISK_GB allocations from compute nodes to their sharing "
             "provider (nova bug 1784020)",
        description="move every consumer's DISK_GB from a compute node in a "
                    "sharing aggregate to the sharing provider, one atomic "
                    "write per consumer, and stop the compute node from "
                    "offering DISK_GB; dry run unless --apply")
    where = g.add_mutually_exclusive_group(required=True)
    where.add_argument("--placement-url",
                       help="a placement with auth_strategy=noauth2 (labs)")
    where.add_argument("--config-file", action="append",
                       help="nova.conf: placement from [placement] "
                            "(repeatable)")
    g.add_argument("--apply", action="store_true",
                   help="write the moves (default: dry run)")
    g.set_defaults(storage_handler=run_migrate_disk)


def _conf(files: list[str] | None) -> cfg.ConfigOpts:
    for name in files or []:
        if not os.path.isfile(name):
            raise StorageError(f"--config-file {name}: no such file")
    conf = cfg.ConfigOpts()
    se_conf.register_opts(conf)
    conf([], project="nova", default_config_files=files or [])
    return conf


def run(args: argparse.Namespace) -> int:
    handler = args.storage_handler
    code: int = handler(args)
    return code


def run_discover(args: argparse.Namespace) -> int:
    opts = _conf(args.config_file).storage
    path = args.path or opts.instances_path
    if not os.path.isabs(path):
        raise StorageError("--path must be absolute", host=args.host, path=path)
    probe = Probe(args.host, opts.probe_timeout)
    tables = se_discover.read_tables(probe, args.mountinfo, args.fstab)
    found = se_discover.discover(probe, path, tables,
                                 expect_shared=args.expect_shared,
                                 write_token=not args.read_only,
                                 facts=identity.SystemFacts())
    print(found.to_json())
    return 0 if found.state in ("shared", "local") else 1


def _load_reports(files: list[str]) -> list[se_report.HostReport]:
    out = []
    for name in files:
        try:
            with open(name, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ReportError(f"{name}: cannot read ({exc.strerror})") from None
        out.append(se_report.loads(text, origin=name))
    return out


def run_sync(args: argparse.Namespace) -> int:
    reports = _load_reports(args.reports)
    conf = _conf(args.config_file)
    opts = conf.storage
    topo = topology.build(reports, reserved_disk_gb=opts.reserved_disk_gb,
                          allocation_ratio=opts.disk_allocation_ratio,
                          size_tolerance=opts.size_tolerance)
    client = (HttpPlacement.from_url(args.placement_url) if args.placement_url
              else HttpPlacement.from_conf(conf))
    the_plan = se_sync.plan(client, topo, prune=args.prune,
                            check_strays=args.check_strays)
    for spec in topo.providers:
        print(f"filesystem {spec.filesystem}: provider {spec.name} "
              f"({spec.uuid}), aggregate {spec.aggregate}, DISK_GB "
              f"{spec.inventory.total} (reserved {spec.inventory.reserved}), "
              f"hosts {', '.join(spec.members)}, directories "
              f"{', '.join(spec.domains)}")
    for warning in the_plan.warnings:
        print(f"warning: {warning}")
    for refusal in the_plan.refusals:
        print(f"refused: {refusal}")
    if the_plan.refusals:
        print("nothing written")
        return 1
    verb = "write" if args.apply else "would write"
    for change in the_plan.changes:
        print(f"{verb}: {change.describe()}")
    if args.apply:
        se_sync.apply(client, the_plan)
    print(f"{len(the_plan.changes)} changes"
          + ("" if args.apply or not the_plan.changes
             else " (dry run: --apply writes them)"))
    return 0


def run_migrate_disk(args: argparse.Namespace) -> int:
    conf = _conf(args.config_file)
    client = (HttpPlacement.from_url(args.placement_url) if args.placement_url
              else HttpPlacement.from_conf(conf))
    the_plan = diskmigration.plan(client)
    print(f"nova: {diskmigration.NOVA_SETTING}")
    for node in the_plan.nodes:
        print(f"compute node {node.name} shares {node.sharing_name}"
              + ("" if node.closed else
                 f"; its DISK_GB allocation_ratio goes to "
                 f"{diskmigration.CLOSED_RATIO:g} (offers nothing)"))
    for skipped in the_plan.skipped:
        print(f"skipped: {skipped}")
    if not args.apply:
        for move in the_plan.moves:
            print(f"would move: {move.describe()}")
        print(f"{len(the_plan.moves)} consumers to move, "
              f"{len(the_plan.to_close)} compute nodes to close"
              + (" (dry run: --apply writes them)"
                 if the_plan.moves or the_plan.to_close else ""))
        return 0
    result = diskmigration.apply(client, the_plan)
    for move in result.moved:
        print(f"moved: {move.describe()}")
    for node in result.closed:
        print(f"closed: compute node {node.name} DISK_GB")
    for why in result.failed.values():
        print(f"failed: {why}")
    print(f"{len(result.moved)} consumers moved, {len(result.closed)} compute "
          f"nodes closed, {len(result.failed)} failed")
    return 1 if result.failed else 0
