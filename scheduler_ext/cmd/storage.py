"""``scheduler-ext storage``: shared storage from the real topology.

* ``storage discover``: on a compute host, report where its instances path
  lives (mount, filesystem class, storage domain, size, the hosts that
  share the directory), as JSON by default (cliff's formatters;
  ``--output FILE`` writes the same report whole). It writes the domain
  token and this host's marker into a shared directory unless
  ``--read-only``. Exit 0 for a ``shared`` or ``local`` path, 1 for a
  ``lost-mount`` or ``unconfirmed`` one (the report is printed either way,
  the reason on stderr), 2 for bad input, a path that does not exist, or a
  hung filesystem.
* ``storage sync``: read every host's report, build one sharing provider
  per filesystem and show (dry run, the default) or ``--apply`` the writes
  that make placement match; ``--prune`` also plans the removals. A second
  run writes nothing. Exit 1 if the plan is refused (it would shrink
  inventory below what is allocated).
* ``storage migrate-disk``: move the DISK_GB allocations nova left on
  compute nodes in a sharing aggregate to the sharing provider (dry run
  unless ``--apply``), and say which nova setting keeps it so. Exit 1 if a
  consumer could not be moved (it is left as it was).
* ``storage live-migration SERVER DEST``: what nova's libvirt driver will
  do live-migrating the server, from nova's API and both hosts' reports,
  with every hazard. Exit 1 when nova will refuse it.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any, Sequence

from oslo_config import cfg

from scheduler_ext.cmd import base, common, compute_access, placement_access
from scheduler_ext.storage import diskmigration, identity, livemigration
from scheduler_ext.storage import discover as se_discover
from scheduler_ext.storage import livemigration_check
from scheduler_ext.storage import report as se_report
from scheduler_ext.storage import sync as se_sync
from scheduler_ext.storage import topology
from scheduler_ext.storage.errors import ReportError, StorageError
from scheduler_ext.storage.probe import Probe


def add_discover_arguments(d: argparse.ArgumentParser) -> None:
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
    d.add_argument("--output", metavar="FILE", type=common.writable_file,
                   help="also write the report (JSON) to FILE, whole: "
                        "nothing is written on an error")


def add_sync_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("reports", nargs="+", help="report files (JSON) from "
                                              "'storage discover'")
    placement_access.add_arguments(
        s, config_help="nova.conf: placement from [placement] (unless "
                       "--os-cloud), options from [storage] (repeatable)")
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


def load_conf(files: list[str] | None) -> cfg.ConfigOpts:
    """nova.conf with our options, every [storage] option read and
    checked (UsageError naming the file and the setting)."""
    conf = placement_access.nova_conf(files or [])
    where = f"--config-file {', '.join(files or [])}" if files else "the defaults"
    for opt in conf.storage:
        try:
            conf.storage[opt]
        except (cfg.Error, ValueError) as exc:
            raise common.UsageError(f"{where}: [storage] "
                                    f"{common.setting_problem(exc)}") from None
    return conf


def _utf8_or_missing(path: str, flag: str) -> None:
    """A mount table must be text; a missing one is the library's to say."""
    if os.path.isfile(path):
        common.read_text(path, flag)


class Discover(base.ShowOne):
    """print this host's storage report (JSON by default)"""

    @property
    def formatter_default(self) -> str:
        return "json"       # the report format storage sync reads

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_discover_arguments(parser)

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        args = parsed_args
        opts = load_conf(args.config_file).storage
        path = args.path or opts.instances_path
        if not os.path.isabs(path):
            raise StorageError("--path must be absolute", host=args.host, path=path)
        _utf8_or_missing(args.mountinfo, "--mountinfo")
        _utf8_or_missing(args.fstab, "--fstab")
        probe = Probe(args.host, opts.probe_timeout)
        tables = se_discover.read_tables(probe, args.mountinfo, args.fstab)
        found = se_discover.discover(probe, path, tables,
                                     expect_shared=args.expect_shared,
                                     write_token=not args.read_only,
                                     facts=identity.SystemFacts())
        if args.output:
            with common.write_atomically(args.output) as f:
                f.write(found.to_json() + "\n")
        if found.state not in ("shared", "local"):
            why = f" ({found.lost_mount})" if found.lost_mount else ""
            print(f"scheduler-ext storage discover: host {found.host}, path "
                  f"{found.path}: {found.state}{why}", file=sys.stderr)
            self.exit_code = common.FINDINGS
        return self.dict2columns(found.to_dict())


def load_reports(files: list[str]) -> list[se_report.HostReport]:
    out = []
    for name in files:
        try:
            with open(name, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise ReportError(f"{name}: cannot read ({exc.strerror})") from None
        except UnicodeDecodeError as exc:
            raise ReportError(f"{name}: not UTF-8 text (byte {exc.start})") from None
        out.append(se_report.loads(text, origin=name))
    return out


ACTION_COLUMNS = ("action", "what")


class Sync(base.Lister):
    """apply the hosts' storage reports to placement (dry run unless --apply)"""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_sync_arguments(parser)

    def planned_columns(self, parsed_args: argparse.Namespace) -> Sequence[str]:
        return ACTION_COLUMNS

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        args = parsed_args
        reports = load_reports(args.reports)
        conf = load_conf(args.config_file)
        opts = conf.storage
        topo = topology.build(reports, reserved_disk_gb=opts.reserved_disk_gb,
                              allocation_ratio=opts.disk_allocation_ratio,
                              size_tolerance=opts.size_tolerance)
        client = placement_access.client(args)
        the_plan = se_sync.plan(client, topo, prune=args.prune,
                                check_strays=args.check_strays)
        rows = [("provider", f"filesystem {spec.filesystem}: provider "
                             f"{spec.name} ({spec.uuid}), aggregate "
                             f"{spec.aggregate}, DISK_GB {spec.inventory.total} "
                             f"(reserved {spec.inventory.reserved}), hosts "
                             f"{', '.join(spec.members)}, directories "
                             f"{', '.join(spec.domains)}")
                for spec in topo.providers]
        for warning in the_plan.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        if the_plan.refusals:
            for refusal in the_plan.refusals:
                print(f"refused: {refusal}", file=sys.stderr)
            print("nothing written", file=sys.stderr)
            self.exit_code = common.FINDINGS
            return ACTION_COLUMNS, rows
        verb = "write" if args.apply else "would write"
        rows += [(verb, change.describe()) for change in the_plan.changes]
        if args.apply:
            se_sync.apply(client, the_plan)
        print(f"{len(the_plan.changes)} changes"
              + ("" if args.apply or not the_plan.changes
                 else " (dry run: --apply writes them)"), file=sys.stderr)
        return ACTION_COLUMNS, rows


class MigrateDisk(base.Lister):
    """move DISK_GB allocations from compute nodes to their sharing provider (nova bug 1784020; dry run unless --apply)"""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        placement_access.add_arguments(
            parser, config_help="nova.conf: placement from [placement] "
                                "(unless --os-cloud) (repeatable)")
        parser.add_argument("--apply", action="store_true",
                            help="write the moves (default: dry run)")

    def planned_columns(self, parsed_args: argparse.Namespace) -> Sequence[str]:
        return ACTION_COLUMNS

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        args = parsed_args
        client = placement_access.client(args)
        the_plan = diskmigration.plan(client)
        rows = [("nova", diskmigration.NOVA_SETTING)]
        rows += [("compute node", f"{node.name} shares {node.sharing_name}"
                  + ("" if node.closed else
                     f"; its DISK_GB allocation_ratio goes to "
                     f"{diskmigration.CLOSED_RATIO:g} (offers nothing)"))
                 for node in the_plan.nodes]
        rows += [("skipped", why) for why in the_plan.skipped]
        if not args.apply:
            rows += [("would move", m.describe()) for m in the_plan.moves]
            print(f"{len(the_plan.moves)} consumers to move, "
                  f"{len(the_plan.to_close)} compute nodes to close"
                  + (" (dry run: --apply writes them)"
                     if the_plan.moves or the_plan.to_close else ""),
                  file=sys.stderr)
            return ACTION_COLUMNS, rows
        result = diskmigration.apply(client, the_plan)
        rows += [("moved", m.describe()) for m in result.moved]
        rows += [("closed", f"compute node {n.name} DISK_GB")
                 for n in result.closed]
        rows += [("failed", why) for why in result.failed.values()]
        print(f"{len(result.moved)} consumers moved, {len(result.closed)} "
              f"compute nodes closed, {len(result.failed)} failed",
              file=sys.stderr)
        if result.failed:
            self.exit_code = common.FINDINGS
        return ACTION_COLUMNS, rows


def read_file(name: str | None, flag: str) -> str | None:
    return None if name is None else common.read_text(name, flag)


def _compute_conf(name: str | None, flag: str) -> livemigration_check.ComputeConf:
    text = read_file(name, flag)
    return (livemigration_check.compute_conf(text, f"{flag} {name}")
            if text is not None else livemigration_check.ComputeConf())


def _libvirt_version(text: str | None) -> tuple[int, ...]:
    if not text:
        return livemigration.MIN_LIBVIRT
    try:
        return tuple(int(x) for x in text.split("."))
    except ValueError:
        raise common.UsageError(f"--libvirt-version {text}: expected numbers "
                                "like 8.0.0") from None


class LiveMigration(base.ShowOne):
    """what nova will do live-migrating a server, and every hazard (exit 1 when nova refuses it)"""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("server", help="server UUID")
        parser.add_argument("destination", help="destination compute host")
        parser.add_argument("--reports", nargs="+", required=True,
                            help="storage reports (JSON of 'storage "
                                 "discover') of the source and the destination")
        compute_access.add_arguments(parser)
        parser.add_argument("--source-conf", metavar="NOVA_CONF",
                            help="the source compute host's nova.conf "
                                 "([libvirt] images_type, "
                                 "live_migration_tunnelled, [DEFAULT] "
                                 "config_drive_format); nova's defaults "
                                 "otherwise")
        parser.add_argument("--destination-conf", metavar="NOVA_CONF",
                            help="the destination's nova.conf")
        parser.add_argument("--block-migration", default="auto",
                            choices=("auto", "true", "false"),
                            help="as the API's block_migration")
        parser.add_argument("--libvirt-version",
                            help="the hosts' libvirt version (default: one "
                                 "nova 34 runs on, 8.0.0)")

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        args = parsed_args
        reports = {r.host: r for r in load_reports(args.reports)}
        result = livemigration_check.check(
            compute_access.endpoint(args), args.server, args.destination,
            reports,
            source_conf=_compute_conf(args.source_conf, "--source-conf"),
            destination_conf=_compute_conf(args.destination_conf,
                                           "--destination-conf"),
            block_migration={"auto": None, "true": True,
                             "false": False}[args.block_migration],
            libvirt_version=_libvirt_version(args.libvirt_version))
        d, disks = result.decision, result.disks
        if d.kind == "error":
            self.exit_code = common.FINDINGS
        return (("server", "source", "destination", "disks",
                 "shared instance path", "shared block storage", "nova does",
                 "reason", "nova source", "hazards"),
                (result.server, result.source, result.destination,
                 f"{'volume-backed' if disks.volume_backed else 'image-backed'}"
                 f", {disks.volumes} other volume(s), config drive "
                 f"{disks.config_drive or 'none'}, ephemeral {disks.ephemeral}, "
                 f"swap {'yes' if disks.swap else 'no'}",
                 d.shared_instance_path, d.shared_block_storage, d.summary(),
                 d.reason, d.source,
                 "; ".join(f"{h.value}: {livemigration.HAZARD_TEXT[h]}"
                           for h in d.hazards) or "-"))
