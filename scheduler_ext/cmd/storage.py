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
  per storage domain and show (dry run, the default) or ``--apply`` the
  writes that make placement match. A second run writes nothing. Exit 1 if
  the plan is refused (it would shrink inventory below what is allocated).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any, Sequence

from oslo_config import cfg

from scheduler_ext.cmd import base, common, placement_access
from scheduler_ext.storage import discover as se_discover
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
    s.add_argument("--check-strays", action="store_true",
                   help="also warn about providers in a domain's aggregate "
                        "that no report lists (one read per provider)")


def _conf(files: list[str] | None) -> cfg.ConfigOpts:
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
        opts = _conf(args.config_file).storage
        path = args.path or opts.instances_path
        if not os.path.isabs(path):
            raise StorageError("--path must be absolute", host=args.host, path=path)
        _utf8_or_missing(args.mountinfo, "--mountinfo")
        _utf8_or_missing(args.fstab, "--fstab")
        probe = Probe(args.host, opts.probe_timeout)
        tables = se_discover.read_tables(probe, args.mountinfo, args.fstab)
        found = se_discover.discover(probe, path, tables,
                                     expect_shared=args.expect_shared,
                                     write_token=not args.read_only)
        if args.output:
            with common.write_atomically(args.output) as f:
                f.write(found.to_json() + "\n")
        if found.state not in ("shared", "local"):
            why = f" ({found.lost_mount})" if found.lost_mount else ""
            print(f"scheduler-ext storage discover: host {found.host}, path "
                  f"{found.path}: {found.state}{why}", file=sys.stderr)
            self.exit_code = common.FINDINGS
        return self.dict2columns(found.to_dict())


def _load_reports(files: list[str]) -> list[se_report.HostReport]:
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


SYNC_COLUMNS = ("action", "what")


class Sync(base.Lister):
    """apply the hosts' storage reports to placement (dry run unless --apply)"""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_sync_arguments(parser)

    def planned_columns(self, parsed_args: argparse.Namespace) -> Sequence[str]:
        return SYNC_COLUMNS

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        args = parsed_args
        reports = _load_reports(args.reports)
        conf = _conf(args.config_file)
        opts = conf.storage
        topo = topology.build(reports, reserved_disk_gb=opts.reserved_disk_gb,
                              allocation_ratio=opts.disk_allocation_ratio,
                              size_tolerance=opts.size_tolerance)
        client = placement_access.client(args)
        the_plan = se_sync.plan(client, topo, check_strays=args.check_strays)
        rows = [("provider", f"domain {spec.domain}: provider {spec.name} "
                             f"({spec.uuid}), aggregate {spec.aggregate}, DISK_GB "
                             f"{spec.inventory.total} (reserved "
                             f"{spec.inventory.reserved}), hosts "
                             f"{', '.join(spec.members)}")
                for spec in topo.providers]
        for warning in the_plan.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        if the_plan.refusals:
            for refusal in the_plan.refusals:
                print(f"refused: {refusal}", file=sys.stderr)
            print("nothing written", file=sys.stderr)
            self.exit_code = common.FINDINGS
            return SYNC_COLUMNS, rows
        verb = "write" if args.apply else "would write"
        rows += [(verb, change.describe()) for change in the_plan.changes]
        if args.apply:
            se_sync.apply(client, the_plan)
        print(f"{len(the_plan.changes)} changes"
              + ("" if args.apply or not the_plan.changes
                 else " (dry run: --apply writes them)"), file=sys.stderr)
        return SYNC_COLUMNS, rows
