"""Run a real ``openstack-placement`` on 127.0.0.1 for tests and benchmarks.

Needs the ``test`` extra (openstack-placement, gunicorn). The service uses
``auth_strategy = noauth2`` and an sqlite database in a private temporary
directory (or the database given), and is stopped (and its files removed)
on exit. Gunicorn runs ``workers`` processes of class ``sync`` (one request
at a time each) or ``gthread`` (``threads`` requests at a time each).
Extra placement.conf settings are checked against placement's own option
definitions before anything starts.
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
from typing import Any, Mapping

from scheduler_ext import errors

WORKER_CLASSES = ("sync", "gthread")
#: set by LocalPlacement itself; not accepted in ``placement_conf``
_OWNED = {("api", "auth_strategy"), ("placement_database", "connection"),
          ("placement_database", "sync_on_startup")}


def _base_conf(database_url: str) -> dict[str, dict[str, str]]:
    return {"DEFAULT": {"debug": "False"},
            "api": {"auth_strategy": "noauth2"},
            "placement_database": {"connection": database_url,
                                   "sync_on_startup": "False"},
            "placement": {"randomize_allocation_candidates": "False"}}


def _render(conf: Mapping[str, Mapping[str, str]]) -> str:
    return "".join(f"[{section}]\n" + "".join(
        f"{k} = {v}\n" for k, v in opts.items()) for section, opts in conf.items())


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)) and "\n" not in str(value):
        return str(value)
    raise ValueError(f"{value!r} is not a one-line string, number or bool")


def validate_placement_conf(
        settings: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, str]]:
    """Check extra placement.conf settings, ``{section: {option: value}}``,
    against openstack-placement's own option definitions (section and
    option exist, value parses as the option's type); return them as
    strings. ``[placement] allocation_conflict_retry_count`` must be >= 1
    (0 makes placement refuse every allocation write). Raises ConfigError
    naming the setting."""
    if not settings:
        return {}
    try:
        from placement.conf import opts as placement_opts
    except ImportError as exc:
        raise errors.ConfigError(
            "placement.conf settings need openstack-placement: "
            "pip install -e '.[test]'", option="placement_conf") from exc
    known = {group if isinstance(group, str) else group.name:
             {o.name: o for o in group_opts}
             for group, group_opts in placement_opts.list_opts()}
    checked: dict[str, dict[str, str]] = {}
    for section, options in dict(settings).items():
        if section not in known or not isinstance(options, Mapping):
            raise errors.ConfigError(
                f"placement.conf has no section [{section}] we can set "
                f"(known: {', '.join(sorted(known))})",
                option="placement_conf", value=section)
        for name, value in options.items():
            where = f"[{section}] {name}"
            if name not in known[section] or (section, name) in _OWNED:
                raise errors.ConfigError(
                    f"placement.conf {where}: not a placement option that "
                    "can be set here", option=where, value=value)
            try:
                text = _conf_value(value)
                parsed = known[section][name].type(text)
            except ValueError as exc:
                raise errors.ConfigError(f"placement.conf {where}: {exc}",
                                         option=where, value=value) from None
            if name == "allocation_conflict_retry_count" and parsed < 1:
                raise errors.ConfigError(
                    f"placement.conf {where} must be >= 1, got {value!r}",
                    option=where, value=value)
            checked.setdefault(section, {})[name] = text
    return checked


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPlacement:
    """Context manager: ``with LocalPlacement() as url: ...``.

    ``workers`` is the number of gunicorn worker processes, each of
    ``worker_class`` ``sync`` (``threads`` must be 1) or ``gthread``
    (``threads`` request threads each); ``database_url`` an SQLAlchemy URL
    (default: sqlite in the private directory, see ``database_url`` after
    start); ``placement_conf`` extra settings ``{section: {option: value}}``
    (see ``validate_placement_conf``). Bad values raise ConfigError here,
    before anything starts.
    """

    def __init__(self, workers: int = 1, startup_timeout: float = 60.0,
                 database_url: str | None = None, *,
                 worker_class: str = "sync", threads: int = 1,
                 placement_conf: Mapping[str, Mapping[str, Any]] | None = None):
        for name, value in (("workers", workers), ("threads", threads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise errors.ConfigError(
                    f"{name} must be an integer >= 1, got {value!r}",
                    option=name, value=value)
        if worker_class not in WORKER_CLASSES:
            raise errors.ConfigError(
                f"worker_class must be one of {', '.join(WORKER_CLASSES)}, "
                f"got {worker_class!r}", option="worker_class",
                value=worker_class)
        if worker_class == "sync" and threads != 1:
            # gunicorn would silently switch such a worker to gthread
            raise errors.ConfigError(
                f"threads must be 1 with sync workers, got {threads}",
                option="threads", value=threads)
        self.workers = workers
        self.worker_class = worker_class
        self.threads = threads
        self.placement_conf = validate_placement_conf(placement_conf)
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
        conf = _base_conf(self.database_url)
        for section, options in self.placement_conf.items():
            conf.setdefault(section, {}).update(options)
        with open(os.path.join(self._dir, "placement.conf"), "w") as f:
            f.write(_render(conf))
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
             "-w", str(self.workers), "-k", self.worker_class,
             "--threads", str(self.threads), "--timeout", "300",
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

    def log_text(self) -> str:
        """Everything placement logged so far (warnings and above)."""
        if not self._dir:
            return ""
        try:
            with open(os.path.join(self._dir, "placement.log")) as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "".join(self.log_text().splitlines(True)[-lines:])

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
