"""A throw-away PostgreSQL on 127.0.0.1, for a multi-writer placement
database in benchmarks and tests (sqlite serializes every writer).

Uses the distribution's PostgreSQL server binaries (``initdb``,
``pg_ctl``); as root it runs them as the ``postgres`` user. Fsync is off:
the data is scratch.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile

from scheduler_ext import errors
from scheduler_ext.lab.placement_server import free_port


def _bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if not found:
        raise errors.SchedulerExtError(
            f"PostgreSQL's {name} is not installed (Debian: apt-get install "
            "postgresql)")
    return found


class LocalPostgres:
    """``with LocalPostgres() as url:`` gives an SQLAlchemy URL of an empty
    database ``placement`` owned by user ``placement``."""

    def __init__(self, max_connections: int = 200):
        self.max_connections = max_connections
        self._dir: str | None = None
        self._as: list[str] = []

    def _run(self, *cmd: str) -> None:
        proc = subprocess.run(self._as + list(cmd), capture_output=True, text=True)
        if proc.returncode:
            raise errors.SchedulerExtError(
                f"{os.path.basename(cmd[0])} failed: {proc.stderr.strip() or proc.stdout.strip()}")

    def start(self) -> str:
        self._dir = tempfile.mkdtemp(prefix="scheduler-ext-pg-")
        if os.geteuid() == 0:
            # the server refuses to run as root
            shutil.chown(self._dir, "postgres", "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]
        data = os.path.join(self._dir, "data")
        port = free_port()
        self._run(_bin("initdb"), "-D", data, "-U", "placement", "-A", "trust",
                  "--no-sync", "-E", "UTF8")
        self._run(_bin("pg_ctl"), "-D", data, "-l",
                  os.path.join(self._dir, "postgres.log"), "-w", "-o",
                  f"-p {port} -k {self._dir} -c listen_addresses=127.0.0.1 "
                  f"-c fsync=off -c synchronous_commit=off "
                  f"-c max_connections={self.max_connections}", "start")
        self._run(_bin("createdb"), "-h", "127.0.0.1", "-p", str(port),
                  "-U", "placement", "placement")
        return f"postgresql+psycopg2://placement@127.0.0.1:{port}/placement"

    def stop(self) -> None:
        if self._dir:
            data = os.path.join(self._dir, "data")
            try:
                self._run(_bin("pg_ctl"), "-D", data, "-m", "fast", "-w", "stop")
            except errors.SchedulerExtError:
                pass
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> str:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
