"""``scheduler-ext audit``: check a placement against the invariants, and
reconcile move allocations against what nova knows.

Placement alone: usage equals the sum of the consumers' allocations and
stays within capacity on every provider; migration consumers holding
allocations are listed. What nova knows comes from nova itself when
``--config-file`` is given and nova is installed (instances, flavors and
migrations through nova's objects, as the scheduler service reads them),
or from ``--instances FILE`` (the format is in ``audit_input``; ``--export
FILE`` writes it from what was read). With it, the audit plans one atomic
fix per instance whose allocations are off (a migration left holding, a
same-host resize still holding max(old, new), a class lost from a sharing
provider, more than the flavor) and, when nova was read, one per consumer
nova does not know (its allocations are deleted, as ``nova-manage placement
audit --delete`` does). A dry run by default; ``--apply`` writes the fixes
one at a time, says each on stderr, stops at the first error saying what
was and was not written, and ends with a summary (stderr). The findings and
fixes are rows through cliff's formatters (kind, subject, detail, state).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any, Sequence

from scheduler_ext.cmd import base, common
from scheduler_ext.cmd import audit_input, placement_access
from scheduler_ext.cmd.audit_plan import Findings, examine
from scheduler_ext.moves.reconcile import dump_instances


def add_arguments(parser: argparse.ArgumentParser) -> None:
    placement_access.add_arguments(
        parser, config_help="nova.conf: placement from its [placement] "
                            "options (unless --os-cloud), and nova (when "
                            "installed) read through its objects (repeatable)")
    parser.add_argument("--instances", type=common.readable_file, metavar="FILE",
                        help="what nova knows, from a JSON file (instead of "
                             "reading nova); enables reconcile")
    parser.add_argument("--no-nova", action="store_true",
                        help="with --config-file: do not read nova")
    parser.add_argument("--export", type=common.writable_file, metavar="FILE",
                        help="write the instances read (from nova or "
                             "--instances) as JSON to FILE, for offline use")
    parser.add_argument("--apply", action="store_true",
                        help="write the fixes, one at a time (default: dry run)")


def _nova(args: argparse.Namespace, context: Any) -> Any:
    """What nova knows (a NovaView), or None when it is not to be read."""
    if context is None:
        if not args.config_file or args.no_nova or args.instances:
            return None
        if importlib.util.find_spec("nova") is None:
            print("scheduler-ext audit: nova is not installed here: checking "
                  "placement alone (--instances FILE gives what nova knows)",
                  file=sys.stderr)
            return None
    from oslo_db import exception as db_exc     # installed with nova

    from scheduler_ext.nova import audit as nova_audit
    try:
        if context is None:
            context = nova_audit.admin_context(args.config_file)
        return nova_audit.read(context)
    except db_exc.DBConnectionError as exc:
        raise common.Unreachable(
            f"--config-file {', '.join(args.config_file or [])}: nova's "
            f"database could not be reached: {exc}") from None
    except Exception as exc:    # nova's config and database: any failure
        raise common.UsageError(
            f"--config-file {', '.join(args.config_file or [])}: reading nova "
            f"failed: {type(exc).__name__}: {exc}") from None


def run(args: argparse.Namespace, nova_context: Any = None) -> tuple[int, Findings]:
    """The audit: (exit code, findings); ``nova_context`` (tests inside
    nova's harness) reads nova through that admin context instead of
    nova.conf's databases."""
    if args.no_nova and not args.config_file:
        raise common.UsageError("--no-nova: only with --config-file (nova is "
                                "read only through nova.conf; without it "
                                "nova is not read anyway)")
    states = known = None
    if args.instances:
        states = audit_input.instances_file(args.instances)
    client = placement_access.client(args)
    view = _nova(args, nova_context)
    if view is not None:
        states, known = list(view.instances), view.known
    if args.export and states is None:
        raise common.UsageError("--export: nothing to export: read nova "
                                "(--config-file, nova installed) or give "
                                "--instances")
    found = examine(client, states, known)
    if view is not None:
        found.left_alone = list(view.left_alone)
    if args.export:
        common.write_json(args.export, dump_instances(states or []))
    code = found.apply(client) if args.apply else None
    if code is None:
        code = common.FINDINGS if found.open_findings() else common.OK
    return code, found


class Audit(base.Lister):
    """check a placement against the invariants; reconcile moves"""

    #: nova's admin context when run inside nova's test harness (else None:
    #: nova is read through --config-file)
    nova_context: Any = None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser)

    def planned_columns(self, parsed_args: argparse.Namespace) -> Sequence[str]:
        return Findings.columns()

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        self.exit_code, found = run(parsed_args, self.nova_context)
        print(found.summary(parsed_args.apply), file=sys.stderr)
        return found.columns(), list(found.rows(parsed_args.apply))
