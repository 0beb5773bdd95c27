"""The ``scheduler-ext`` command: one sub-command per operator job.

Each sub-command lives in its own module exposing ``add_arguments(parser)``
and ``run(args) -> int``; this file only wires them together.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from scheduler_ext import errors

#: sub-command -> (module, one-line help)
COMMANDS = {
    "simulate": ("scheduler_ext.cmd.simulate",
                 "replay resize/migrate scenarios on an embedded placement"),
    "bench": ("scheduler_ext.cmd.bench",
              "measure the numpy engine against baselines, as ratios"),
    "audit": ("scheduler_ext.cmd.audit",
              "check a placement against the invariants; reconcile moves"),
    "storage": ("scheduler_ext.cmd.storage",
                "shared storage from the real topology: discover, sync"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scheduler-ext",
        description="Operator tools of the scheduler-ext nova scheduler extension.")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log warnings (-v) or everything (-vv) to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in COMMANDS.items():
        mod = importlib.import_module(module)
        p = sub.add_parser(name, help=help_text, description=help_text)
        mod.add_arguments(p)
        p.set_defaults(handler=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s",
        level=(logging.CRITICAL, logging.WARNING, logging.DEBUG)[min(args.verbose, 2)])
    try:
        return args.handler(args)
    except errors.SchedulerExtError as exc:
        print(f"scheduler-ext {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
