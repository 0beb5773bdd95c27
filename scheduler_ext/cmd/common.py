"""What every sub-command shares: one convention for flags, output, exit
codes and logging.

* Output goes through cliff's formatters (``-f table|json|yaml|value|csv``,
  ``-c COLUMN``); logs, progress, warnings and findings' details go to
  stderr.
* Exit codes (``EXIT_CODES``): 0 ok, 1 findings, 2 bad input or
  configuration, 3 a service could not be reached, 130 interrupted.
* Every numeric flag is checked by argparse (``count``, ``count_list``,
  ``number``); every file or directory to write is checked before any work
  starts (``writable_file``, ``writable_dir``); every input file is read
  and checked before any work starts. The benchmarks under ``benchmarks/``
  that import the package check their flags the same way.
* An error is one line on stderr naming the flag, file and line or setting
  and what was wrong (``UsageError``, ``Unreachable``), worded as ours;
  placement's own answers are quoted as placement's.
* Files are written whole or not at all (``write_atomically``).
* Logging goes through oslo.log to stderr (``setup_logging``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
from typing import Any, Callable, Iterator, NoReturn

from oslo_config import cfg
from oslo_log import log as oslo_logging

OK, FINDINGS, USAGE, UNREACHABLE, INTERRUPTED = 0, 1, 2, 3, 130
#: exit code -> what it means (the README's table)
EXIT_CODES = {OK: "ok",
              FINDINGS: "findings: an invariant broke, the audit found "
                        "damage, a lost mount, a refused storage plan, an "
                        "evacuation alert or failure",
              USAGE: "bad input or configuration",
              UNREACHABLE: "a service (placement, keystone) could not be "
                           "reached",
              INTERRUPTED: "interrupted (Ctrl-C)"}


class UsageError(Exception):
    """Bad input or an unusable environment, found by our own checks:
    exit 2 with this one line (it names the flag or file)."""


class Unreachable(Exception):
    """A service (placement, keystone) could not be reached: exit 3 with
    this one line (it names the address and where it was configured)."""


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error printed as one line (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def count(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [minimum, maximum]."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(
                f"must be at most {maximum}, got {value}")
        return value
    parse.__name__ = "integer"
    return parse


def count_list(minimum: int, maximum: int | None = None) -> Callable[[str], list[int]]:
    """An argparse type: comma-separated integers, each in [minimum, maximum]."""
    one = count(minimum, maximum)

    def parse(text: str) -> list[int]:
        values = [one(part.strip()) for part in text.split(",") if part.strip()]
        if not values:
            raise argparse.ArgumentTypeError("needs at least one value")
        return values
    parse.__name__ = "integer list"
    return parse


def number(minimum: float) -> Callable[[str], float]:
    """An argparse type: a finite number >= minimum."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be a number, got {text!r}") from None
        if not value >= minimum or value == float("inf"):   # NaN fails too
            raise argparse.ArgumentTypeError(
                f"must be a finite number of at least {minimum}, got {text}")
        return value
    parse.__name__ = "number"
    return parse


def writable_dir(text: str) -> str:
    """An argparse type: a directory we can write files into, existing or
    to be made (then its parent exists and is writable)."""
    path = os.path.abspath(text)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise argparse.ArgumentTypeError(f"{text}: not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{text}: not writable")
        return text
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"{text}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: {parent} is not writable")
    return text


def writable_file(text: str) -> str:
    """An argparse type: a file we can create or replace (its directory
    exists and is writable; it is not a directory)."""
    path = os.path.abspath(text)
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{text}: is a directory")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"{text}: directory {folder} does not exist")
    if not os.access(folder, os.W_OK) or (
            os.path.exists(path) and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"{text}: not writable")
    return text


def readable_file(text: str) -> str:
    """An argparse type: an existing regular file we can read."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"{text}: not a regular file")
    if not os.access(text, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: not readable")
    return text


def setting_problem(exc: Exception) -> str:
    """oslo.config's complaint about a setting, as "option: reason" (its
    own text names the option inside a LocationInfo repr)."""
    found = re.match(r"Value for option (\S+) from .* is not valid: (.*)", str(exc),
                     re.DOTALL)
    return f"{found.group(1)}: {found.group(2)}" if found else str(exc)


def read_text(path: str, flag: str) -> str:
    """A file's text as UTF-8; UsageError naming the flag otherwise."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{flag} {path}: not UTF-8 text (byte {exc.start})") from None


@contextlib.contextmanager
def write_atomically(path: str, mode: str = "w") -> Iterator[Any]:
    """Open a temporary file beside ``path``; it replaces ``path`` only when
    the block ends normally, and is removed otherwise (an error or Ctrl-C
    leaves no partial file)."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)),
                       f".{os.path.basename(path)}.tmp{os.getpid()}")
    try:
        with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_json(path: str, data: Any) -> None:
    """Write ``data`` as JSON to ``path``, whole or not at all."""
    with write_atomically(path) as f:
        json.dump(data, f, indent=2, sort_keys=True, default=str)
        f.write("\n")


#: logger levels at -v 0 (warnings), -v 1 (information), -v 2 (debug)
QUIET = ["scheduler_ext=WARNING",
         # the nova model logs what nova's compute logs at ERROR for a move
         # that is expected in a simulation (nothing to move back)
         "scheduler_ext.lab.nova_model=CRITICAL", "stevedore=ERROR",
         # keystoneauth warns about each connection retry: the one error
         # at the end says it all (-v shows the retries)
         "keystoneauth=ERROR", "urllib3=ERROR", "nova=WARNING",
         "oslo_db=WARNING", "sqlalchemy=WARNING"]


def setup_logging(verbose: int, log_file: str | None = None) -> None:
    """oslo.log to stderr (and to ``log_file`` when given): warnings by
    default, -v information, -vv debug."""
    conf = cfg.ConfigOpts()
    oslo_logging.register_options(conf)
    levels = list(QUIET)
    if verbose >= 1:
        levels = [lv for lv in levels if not lv.startswith("scheduler_ext")]
        levels.append("scheduler_ext=INFO")
    oslo_logging.set_defaults(default_log_levels=levels)
    conf([], project="scheduler-ext", default_config_files=[])
    conf.set_override("use_stderr", True)
    conf.set_override("debug", verbose >= 2)
    if log_file:
        conf.set_override("log_file", log_file)
    oslo_logging.setup(conf, "scheduler-ext")
    if verbose == 0:
        logging.getLogger().setLevel(logging.WARNING)
