"""What every sub-command shares: one convention for flags, output, exit
codes and logging.

* ``--format table|json`` chooses what goes to stdout; logs and progress go
  to stderr.
* Exit codes: ``OK`` (0) clean, ``FINDINGS`` (1) findings or a broken
  invariant, ``USAGE`` (2) a usage or environment error.
* Every numeric flag is checked by argparse (``count``, ``count_list``,
  ``number``); every file or directory to write is checked before any work
  starts (``writable_file``, ``writable_dir``); every input file is read
  and checked before any work starts. The benchmarks under ``benchmarks/``
  that import the package check their flags the same way.
* A usage error is one line on stderr naming the flag or file and what was
  wrong (``UsageError``); it is worded as ours, never as placement's.
* Logging goes through oslo.log to stderr (``setup_logging``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, Callable, NoReturn

from oslo_config import cfg
from oslo_log import log as oslo_logging

OK, FINDINGS, USAGE = 0, 1, 2
FORMATS = ("table", "json")


class UsageError(Exception):
    """Bad input or an unusable environment, found by our own checks:
    exit 2 with this one line (it names the flag or file)."""


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


def count_list(minimum: int) -> Callable[[str], list[int]]:
    """An argparse type: comma-separated integers, each >= minimum."""
    one = count(minimum)

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


def add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="what stdout shows: a table for people (default) "
                             "or one JSON document")


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


def write_json(path: str, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (a temporary file in
    the same directory, then a rename)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


#: logger levels at -v 0 (warnings), -v 1 (information), -v 2 (debug)
QUIET = ["scheduler_ext=WARNING",
         # the nova model logs what nova's compute logs at ERROR for a move
         # that is expected in a simulation (nothing to move back)
         "scheduler_ext.lab.nova_model=CRITICAL", "stevedore=ERROR",
         "keystoneauth=WARNING", "urllib3=WARNING", "nova=WARNING",
         "oslo_db=WARNING", "sqlalchemy=WARNING"]


def setup_logging(verbose: int) -> None:
    """oslo.log to stderr: warnings by default, -v information, -vv debug."""
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
    oslo_logging.setup(conf, "scheduler-ext")
    if verbose == 0:
        logging.getLogger().setLevel(logging.WARNING)
