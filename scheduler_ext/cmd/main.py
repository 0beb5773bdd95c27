"""The ``scheduler-ext`` command: a cliff application, one class per
sub-command (``base``), registered in ``COMMANDS``.

Adding a sub-command is one class (a ``base.Lister``, ``base.ShowOne`` or
``base.Command`` with ``add_arguments`` and ``take_action``) and one line
here. cliff gives every sub-command ``-f table|json|yaml|value|csv``,
``-c COLUMN``, ``--version``, ``--debug``, ``-v``/``-q`` anywhere on the
line, ``help``, and Ctrl-C / broken-pipe handling.
"""

from __future__ import annotations

import argparse
import os
import sys

from cliff import app as cliff_app
from cliff import command as cliff_command
from cliff import commandmanager

import scheduler_ext
from scheduler_ext.cmd import audit, base, bench, common, evacuate, simulate, storage

#: sub-command name -> its class (the first line of its docstring is its help)
COMMANDS: dict[str, type[cliff_command.Command]] = {
    "simulate": simulate.Simulate,
    "bench": bench.Bench,
    "audit": audit.Audit,
    "storage discover": storage.Discover,
    "storage sync": storage.Sync,
    "storage migrate-disk": storage.MigrateDisk,
    "storage live-migration": storage.LiveMigration,
    "evacuate plan": evacuate.EvacuatePlan,
    "evacuate run": evacuate.EvacuateRun,
}

DESCRIPTION = ("Operator tools of the scheduler-ext nova scheduler extension. "
               "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning
                                          in common.EXIT_CODES.items()) + ".")


def commands() -> commandmanager.CommandManager:
    """cliff's command manager holding ``COMMANDS`` (no entry-point scan)."""
    manager = commandmanager.CommandManager()
    for name, cls in COMMANDS.items():
        manager.add_command(name, cls)
    return manager


class SchedulerExt(cliff_app.App):
    NAME = "scheduler-ext"

    def __init__(self) -> None:
        super().__init__(description=DESCRIPTION,
                         version=scheduler_ext.__version__,
                         command_manager=commands(), deferred_help=True)

    def build_option_parser(self, description: str | None, version: str | None,
                            argparse_kwargs: dict | None = None
                            ) -> argparse.ArgumentParser:
        """cliff's global options, named scheduler-ext whatever the program
        path (cliff names --version after the path it was started by)."""
        parser = super().build_option_parser(
            description, version, dict(argparse_kwargs or {}, prog=self.NAME,
                                        conflict_handler="resolve"))
        parser.add_argument("--version", action="version",
                            version=f"{self.NAME} {version}")
        parser.add_argument("--log-file", type=common.writable_file,
                            help="also log to this file")
        base.one_line_errors(parser)
        return parser

    def configure_logging(self) -> None:
        """oslo.log to stderr (and --log-file): warnings by default, -v
        information, -vv debug (cliff counts the default as 1)."""
        common.setup_logging(max(0, self.options.verbose_level - 1),
                             self.options.log_file)

    def run_subcommand(self, argv: list[str]) -> int:
        """An unknown sub-command is one line on stderr, exit 2."""
        try:
            self.command_manager.find_command(argv)
        except ValueError:
            names = sorted(name for name, _ in self.command_manager
                           if name not in ("complete",))
            print(f"scheduler-ext: error: {' '.join(argv)!r} is not a "
                  f"sub-command; one of: {', '.join(names)}", file=sys.stderr)
            return common.USAGE
        return super().run_subcommand(argv)

    def run(self, argv: list[str]) -> int:
        code: int = super().run(argv)
        return common.USAGE if self.interactive_mode else code

    def interact(self) -> None:
        """No sub-command: the help, exit 2 (an operator tool, not a shell)."""
        self.run_subcommand(["help"])


def parse_args(argv: list[str]) -> tuple[str, argparse.Namespace]:
    """(sub-command name, its parsed flags) of a command line, without
    running it (argparse exits 2 on a bad flag)."""
    app = SchedulerExt()
    app.options, rest = app.parser.parse_known_args(argv)
    factory, name, sub_argv = app.command_manager.find_command(rest)
    command = factory(app, app.options, cmd_name=name)
    return name, command.get_parser(f"scheduler-ext {name}").parse_args(sub_argv)


def main(argv: list[str] | None = None) -> int:
    code = SchedulerExt().run(sys.argv[1:] if argv is None else argv)
    if code == 141:     # stdout's reader left (| head): no flush error at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return code


if __name__ == "__main__":
    sys.exit(main())
