"""Run a real ``openstack-placement`` on 127.0.0.1 for tests and benchmarks.

Needs the ``test`` extra (openstack-placement, gunicorn). The service uses
``auth_strategy = noauth2`` and an sqlite database in a private temporary
directory, and is stopped (and its files removed) on exit.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from scheduler_ext import errors

_CONF = """[DEFAULT]
debug = False
[api]
auth_strategy = noauth2
[placement_database]
connection = {db}
sync_on_startup = False
[placement]
randomize_allocation_candidates = False
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPlacement:
    """Context manager: ``with LocalPlacement() as url: ...``.

    ``workers`` is the number of gunicorn worker processes; ``database_url``
    an SQLAlchemy URL (default: sqlite in the private directory, see
    ``database_url`` after start).
    """

    def __init__(self, workers: int = 1, startup_timeout: float = 60.0,
                 database_url: str | None = None):
        self.workers = workers
        self.database_url = database_url
        self.startup_timeout = startup_timeout
        self.url: str | None = None
        self._proc: subprocess.Popen | None = None
        self._dir: str | None = None

    def start(self) -> str:
        try:
            import gunicorn  # noqa: F401
            import placement  # noqa: F401
        except ImportError as exc:
            raise errors.SchedulerExtError(
                "a local placement needs openstack-placement and gunicorn: "
                "pip install -e '.[test]'") from exc
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self._dir = tempfile.mkdtemp(prefix="scheduler-ext-placement-", dir=base)
        if self.database_url is None:
            self.database_url = "sqlite:///" + os.path.join(self._dir,
                                                          "placement.sqlite")
        with open(os.path.join(self._dir, "placement.conf"), "w") as f:
            f.write(_CONF.format(db=self.database_url))
        env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=self._dir)
        subprocess.run([sys.executable, "-c",
                        "import sys; from placement.cmd.manage import main; "
                        "sys.exit(main())", "--config-dir", self._dir, "db", "sync"],
                       env=env, check=True, capture_output=True)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self._log = open(os.path.join(self._dir, "placement.log"), "w")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-b", f"127.0.0.1:{port}",
             "-w", str(self.workers), "--timeout", "300",
             "placement.wsgi.api:application"],
            env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            try:
                urllib.request.urlopen(self.url + "/", timeout=2).read()
                return self.url
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        log = self.log_tail()
        self.stop()
        raise errors.PlacementUnavailable(f"local placement did not start:\n{log}")

    @property
    def directory(self) -> str | None:
        """The private directory (configuration, log, sqlite database) of
        a started service."""
        return self._dir

    def log_tail(self, lines: int = 40) -> str:
        if not self._dir:
            return ""
        try:
            with open(os.path.join(self._dir, "placement.log")) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
            self._log.close()
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
