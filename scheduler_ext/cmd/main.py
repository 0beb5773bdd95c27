"""The ``scheduler-ext`` command: one sub-command per operator job.

Each sub-command lives in its own module exposing ``add_arguments(parser)``
and ``run(args) -> int``; this file only wires them together and applies
the conventions of ``common`` (exit codes, one-line errors, logging).
"""

from __future__ import annotations

import importlib
import sys

from scheduler_ext import errors
from scheduler_ext.cmd import common

#: sub-command -> (module, one-line help)
COMMANDS = {
    "simulate": ("scheduler_ext.cmd.simulate",
                 "replay resize/migrate scenarios on an embedded placement"),
    "bench": ("scheduler_ext.cmd.bench",
              "measure the numpy engine against baselines, as ratios"),
    "audit": ("scheduler_ext.cmd.audit",
              "check a placement against the invariants; reconcile moves"),
    "storage": ("scheduler_ext.cmd.storage",
                "shared storage from the real topology: discover, sync, "
                "migrate-disk, live-migration"),
    "evacuate": ("scheduler_ext.cmd.evacuate",
                 "quorum-safe fencing and evacuation: plan, run"),
}


def build_parser() -> common.Parser:
    parser = common.Parser(
        prog="scheduler-ext",
        description="Operator tools of the scheduler-ext nova scheduler "
                    "extension. Exit codes: 0 clean, 1 findings or a broken "
                    "invariant, 2 a usage or environment error.")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log information (-v) or everything (-vv) to "
                             "stderr (default: warnings)")
    sub = parser.add_subparsers(dest="command", required=True,
                                parser_class=common.Parser)
    for name, (module, help_text) in COMMANDS.items():
        mod = importlib.import_module(module)
        p = sub.add_parser(name, help=help_text, description=help_text)
        mod.add_arguments(p)
        p.set_defaults(handler=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    common.setup_logging(args.verbose)
    try:
        return args.handler(args)
    except common.UsageError as exc:
        print(f"scheduler-ext {args.command}: error: {exc}", file=sys.stderr)
        return common.USAGE
    except errors.SchedulerExtError as exc:
        # placement's answers print as placement's (status and code); our
        # own checks (InvalidInput, ConfigError) print as ours
        print(f"scheduler-ext {args.command}: error: {exc}", file=sys.stderr)
        return common.USAGE


if __name__ == "__main__":
    sys.exit(main())
