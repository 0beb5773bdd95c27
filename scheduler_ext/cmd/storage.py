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
* ``live-migration SERVER DEST``: what nova's libvirt driver will do
  live-migrating the server, from nova's API and both hosts' reports, with
  every hazard. Exit 1 when nova will refuse it.
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
from scheduler_ext.storage import compute_api, diskmigration
from scheduler_ext.storage import livemigration, livemigration_check
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
    m = sub.add_parser(
        "live-migration",
        help="what nova will do live-migrating a server, and the hazards",
        description="read the server from nova (disks, volumes, config "
                    "drive) and both hosts' storage reports, and print the "
                    "live-migration nova's libvirt driver will choose "
                    "(no copy, a block migration of the listed disks, or its "
                    "error) and every hazard; exit 1 for an error")
    m.add_argument("server", help="server UUID")
    m.add_argument("destination", help="destination compute host")
    m.add_argument("--reports", nargs="+", required=True,
                   help="storage reports (JSON of 'storage discover') of at "
                        "least the source and the destination")
    add_compute_arguments(m)
    m.add_argument("--source-conf", help="the source compute host's "
                   "nova.conf ([libvirt] images_type, live_migration_tunnelled, "
                   "[DEFAULT] config_drive_format); nova's defaults otherwise")
    m.add_argument("--destination-conf", help="the destination's nova.conf")
    m.add_argument("--block-migration", choices=("auto", "true", "false"),
                   default="auto", help="as the API's block_migration")
    m.add_argument("--libvirt-version", default=None,
                   help="the hosts' libvirt version (default: one nova 34 "
                        "runs on, 8.0.0)")
    m.set_defaults(storage_handler=run_live_migration)


def add_compute_arguments(parser: argparse.ArgumentParser) -> None:
    """Where nova's compute API is: a URL (noauth2 labs) or nova.conf's
    ``[placement]`` credentials (an admin user) and the catalog."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--compute-url",
                       help="a compute API with auth_strategy=noauth2 (labs)")
    where.add_argument("--config-file", action="append",
                       help="nova.conf: the compute API through the catalog "
                            "with [placement]'s credentials; [storage] "
                            "options (repeatable)")


def compute_endpoint(args: argparse.Namespace) -> compute_api.KeystoneCompute:
    if args.compute_url:
        return compute_api.KeystoneCompute.from_url(args.compute_url)
    return compute_api.KeystoneCompute.from_conf(load_conf(args.config_file))


def load_conf(files: list[str] | None) -> cfg.ConfigOpts:
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
    opts = load_conf(args.config_file).storage
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


def load_reports(files: list[str]) -> list[se_report.HostReport]:
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
    reports = load_reports(args.reports)
    conf = load_conf(args.config_file)
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
    conf = load_conf(args.config_file)
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


def read_file(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        with open(name, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise StorageError(f"{name}: cannot read ({exc.strerror})") from None


def _compute_conf(name: str | None) -> livemigration_check.ComputeConf:
    text = read_file(name)
    return (livemigration_check.compute_conf(text, name or "")
            if text is not None else livemigration_check.ComputeConf())


def run_live_migration(args: argparse.Namespace) -> int:
    reports = {r.host: r for r in load_reports(args.reports)}
    version = livemigration.MIN_LIBVIRT
    if args.libvirt_version:
        try:
            version = tuple(int(x) for x in args.libvirt_version.split("."))
        except ValueError:
            raise StorageError(f"--libvirt-version {args.libvirt_version!r}: "
                               "expected numbers like 8.0.0") from None
    result = livemigration_check.check(
        compute_endpoint(args), args.server, args.destination, reports,
        source_conf=_compute_conf(args.source_conf),
        destination_conf=_compute_conf(args.destination_conf),
        block_migration={"auto": None, "true": True,
                         "false": False}[args.block_migration],
        libvirt_version=version)
    d = result.decision
    disks = result.disks
    print(f"server {result.server}: {result.source} -> {result.destination}")
    print(f"disks: {'volume-backed' if disks.volume_backed else 'image-backed'}"
          f", {disks.volumes} other volume(s), config drive "
          f"{disks.config_drive or 'none'}, ephemeral {disks.ephemeral}, swap "
          f"{'yes' if disks.swap else 'no'}")
    print(f"shared instance path: {'yes' if d.shared_instance_path else 'no'}"
          f"; shared block storage: {'yes' if d.shared_block_storage else 'no'}")
    print(f"nova does: {d.summary()}" + (f" ({d.reason})" if d.reason else "")
          + f" [{d.source}]")
    for hazard in d.hazards:
        print(f"hazard {hazard.value}: {livemigration.HAZARD_TEXT[hazard]}")
    return 1 if d.kind == "error" else 0
