"""The ``scheduler-ext`` console script: imports nothing heavy before it
can answer Ctrl-C (the command's imports take a second or two), then runs
``main.main``. SIGTERM is taken as Ctrl-C, so that what a command started
(a placement, a PostgreSQL, worker processes) is stopped on the way out."""

from __future__ import annotations

import signal
import sys

INTERRUPTED = 130       # common.INTERRUPTED, without importing it


def main() -> int:
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        from scheduler_ext.cmd import main as cli
        return cli.main()
    except KeyboardInterrupt:       # before cliff took over (imports, set-up)
        print("scheduler-ext: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
