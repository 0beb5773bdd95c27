"""The base classes of every sub-command: cliff's ``Command``, ``Lister``
and ``ShowOne`` with our conventions (``common``).

A sub-command is one class based on these, registered by one line in
``main.COMMANDS``. Its ``take_action`` returns what cliff's formatters
print (a Lister: columns and rows; a ShowOne: fields and values) and may
set ``self.exit_code`` (``common.FINDINGS`` when it found something). What
it raises becomes one line on stderr and an exit code:

* ``common.UsageError``, our ``InvalidInput``, ``ConfigError`` and the
  storage tools' errors: 2;
* ``common.Unreachable`` and placement unreachable or failing (5xx): 3;
* placement's other answers (quoted as placement's): 2;
* ``MemoryError``: 2 (the input asks for more than the machine has);
* Ctrl-C: 130; a closed stdout (``| head``): 141, silently.

Anything else is a bug of ours: one line, exit 70 (``--debug`` shows the
traceback).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn, Sequence

from cliff import command as cliff_command
from cliff import lister as cliff_lister
from cliff import show as cliff_show

from scheduler_ext import errors
from scheduler_ext.cmd import common
from scheduler_ext.storage.compute_api import ComputeUnreachable

#: a bug of ours (sysexits' EX_SOFTWARE), never a finding
INTERNAL = 70
#: stdout was closed by its reader (128 + SIGPIPE), as cliff reports it
BROKEN_PIPE = 141


def _one_line_error(self: argparse.ArgumentParser, message: str) -> NoReturn:
    """A usage error printed as one line (no usage block), exit 2."""
    self.exit(common.USAGE, f"{self.prog}: error: {message}\n")


def one_line_errors(parser: argparse.ArgumentParser) -> None:
    """Keep cliff's parser class, with one-line usage errors."""
    parser.__class__ = type("OneLineParser", (type(parser),),
                            {"error": _one_line_error})


def classify(exc: BaseException) -> tuple[int, str]:
    """(exit code, one line) for an error a sub-command raised."""
    if isinstance(exc, common.UsageError):
        return common.USAGE, str(exc)
    if isinstance(exc, (common.Unreachable, ComputeUnreachable)):
        return common.UNREACHABLE, str(exc)
    if isinstance(exc, (errors.PlacementUnreachable, errors.PlacementDatabaseError)):
        return common.UNREACHABLE, str(exc)         # placement said nothing
    if isinstance(exc, errors.PlacementUnavailable):
        return common.UNREACHABLE, f"placement answered: {exc}"
    if isinstance(exc, errors.InvalidInput):
        return common.USAGE, str(exc)
    if isinstance(exc, errors.PlacementError):
        return common.USAGE, f"placement answered: {exc}"
    if isinstance(exc, errors.SchedulerExtError):
        return common.USAGE, str(exc)
    if isinstance(exc, MemoryError):
        return common.USAGE, ("not enough memory for what the flags ask "
                              "(a smaller size fits)")
    return INTERNAL, (f"internal error (a bug in scheduler-ext): "
                      f"{type(exc).__name__}: {exc} (--debug shows the "
                      "traceback)")


class _Conventions:
    """Our flags' parser, error lines and exit codes around cliff's run."""

    app: Any
    app_args: Any
    cmd_name: str | None
    #: set by take_action: common.FINDINGS when something was found
    exit_code: int = common.OK

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)     # type: ignore[misc]
        one_line_errors(parser)
        self.add_arguments(parser)
        return parser

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The sub-command's own flags."""

    def _generate_columns_and_selector(self, parsed_args: argparse.Namespace,
                                       column_names: Any) -> Any:
        """cliff's -c check, as a usage error naming the flag."""
        try:
            return super()._generate_columns_and_selector(  # type: ignore[misc]
                parsed_args, column_names)
        except ValueError:
            raise common.UsageError(
                f"-c {', '.join(parsed_args.columns)}: no such column; the "
                f"columns are: {', '.join(column_names)}") from None

    def error(self, text: str) -> None:
        """One line on stderr, prefixed with the command's name."""
        print(f"scheduler-ext {self.cmd_name}: error: {text}", file=sys.stderr,
              flush=True)

    def check_before_work(self, parsed_args: argparse.Namespace) -> None:
        """What can be checked before any work (besides argparse's checks)."""

    def run(self, parsed_args: argparse.Namespace) -> int:
        self.exit_code = common.OK
        try:
            self.check_before_work(parsed_args)
            code: int = super().run(parsed_args)    # type: ignore[misc]
        except KeyboardInterrupt:
            self.error("interrupted (no file was left half-written)")
            return common.INTERRUPTED
        except BrokenPipeError:
            return BROKEN_PIPE
        except Exception as exc:    # every error: one line and its exit code
            code, text = classify(exc)
            if self.app_args.debug:
                self.app.LOG.exception(exc)
            self.error(text)
            return code
        return code or self.exit_code


class Command(_Conventions, cliff_command.Command):
    """A sub-command without tabular output."""


class Lister(_Conventions, cliff_lister.Lister):
    """A sub-command printing rows (columns, rows) through cliff."""

    def planned_columns(self, parsed_args: argparse.Namespace) -> Sequence[str]:
        """The columns take_action will return, known from the flags (so
        -c is checked before a long run)."""
        raise NotImplementedError

    def check_before_work(self, parsed_args: argparse.Namespace) -> None:
        if parsed_args.columns:
            self._generate_columns_and_selector(parsed_args,
                                                self.planned_columns(parsed_args))


class ShowOne(_Conventions, cliff_show.ShowOne):
    """A sub-command printing one record (fields, values) through cliff."""
