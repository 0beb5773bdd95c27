"""Filesystem calls on a path, each time-boxed, and the shared-directory
tokens.

A hung network or cluster filesystem blocks ``stat``/``statfs`` in the
kernel, possibly for ever. Every call on the probed path is time-boxed
(``timebox``) and abandoned after ``timeout`` seconds with ``ProbeTimeout``
naming the host and the path. Calls on the real filesystem run in a forked
child, so one stuck in the kernel cannot keep this process from exiting;
injected calls (``FsOps``: the tests hang a call on purpose and describe a
filesystem without mounting it) run in a thread unless ``isolate`` says
otherwise.

Tokens, as nova confirms a shared instances path (a file created by one host
must be visible to the other): the first host to probe a shared directory
creates ``.scheduler-ext-storage-domain`` there with a random UUID (created
exclusively, so concurrent first probes agree); every host reads it and
writes its own marker ``.scheduler-ext-storage-host.<host>`` holding that
UUID. A host's report lists the markers it sees: the hosts that wrote into
the same directory.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import re
import uuid as uuidlib
from typing import Any, Callable, TypeVar

from scheduler_ext.storage import timebox
from scheduler_ext.storage.errors import PathNotFound, ProbeTimeout, StorageError

T = TypeVar("T")

DOMAIN_TOKEN = ".scheduler-ext-storage-domain"
HOST_MARKER = ".scheduler-ext-storage-host."
HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


def _create_exclusive(path: str, text: str) -> bool:
    """Create ``path`` with ``text``; False if it already exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return True


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _write_text(path: str, text: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


@dataclasses.dataclass(frozen=True)
class FsOps:
    """The filesystem calls a probe makes (defaults: the real ones)."""

    realpath: Callable[[str], str] = os.path.realpath
    stat: Callable[[str], Any] = os.stat
    statvfs: Callable[[str], Any] = os.statvfs
    listdir: Callable[[str], list[str]] = os.listdir
    touch: Callable[[str], None] = lambda p: os.utime(p, None)
    read_text: Callable[[str], str] = _read_text
    write_text: Callable[[str, str], None] = _write_text
    create_exclusive: Callable[[str, str], bool] = _create_exclusive


@dataclasses.dataclass(frozen=True)
class FsSize:
    """statfs figures in bytes. ``root_reserved`` is what only root may use
    (free minus available)."""

    total: int
    free: int
    available: int

    @property
    def root_reserved(self) -> int:
        return max(0, self.free - self.available)


class Probe:
    """Time-boxed calls on one host's paths."""

    def __init__(self, host: str, timeout: float = 10.0,
                 ops: FsOps | None = None, isolate: bool | None = None):
        if not HOST_NAME.match(host or ""):
            raise StorageError(f"host name {host!r} is not a valid host name",
                               host=host)
        if not timeout > 0:
            raise StorageError(f"probe timeout {timeout!r} must be > 0",
                               host=host)
        self.host = host
        self.timeout = timeout
        self.ops = ops or FsOps()
        self.isolate = (ops is None) if isolate is None else isolate

    def call(self, what: str, path: str, fn: Callable[[], T]) -> T:
        """``fn()`` time-boxed; OS errors become StorageErrors naming the
        host, the path and the call."""
        def late() -> Exception:
            return ProbeTimeout(
                f"{what} did not answer within {self.timeout:g} s (hung or "
                "unreachable filesystem)", host=self.host, path=path)
        try:
            run = timebox.in_child if self.isolate else timebox.in_thread
            return run(fn, self.timeout, late)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise PathNotFound(f"{what}: does not exist ({exc.strerror})",
                               host=self.host, path=path) from None
        except OSError as exc:
            reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
            raise StorageError(f"{what} failed: {reason}", host=self.host,
                               path=path) from None

    def realpath(self, path: str) -> str:
        return self.call("realpath", path, lambda: self.ops.realpath(path))

    def device(self, path: str) -> tuple[int, int]:
        """(major, minor) of the filesystem holding ``path``, which must be
        an existing directory."""
        st = self.call("stat", path, lambda: self.ops.stat(path))
        if not (st.st_mode & 0o170000 == 0o040000):
            raise PathNotFound("is not a directory", host=self.host, path=path)
        return (os.major(st.st_dev), os.minor(st.st_dev))

    def size(self, path: str) -> FsSize:
        sv = self.call("statfs", path, lambda: self.ops.statvfs(path))
        unit = sv.f_frsize or sv.f_bsize
        return FsSize(sv.f_blocks * unit, sv.f_bfree * unit, sv.f_bavail * unit)

    def read_token(self, directory: str) -> str | None:
        """The domain token in ``directory``, None if there is none."""
        path = os.path.join(directory, DOMAIN_TOKEN)
        try:
            text = self.call("read domain token", path,
                             lambda: self.ops.read_text(path))
        except PathNotFound:
            return None
        try:
            return str(uuidlib.UUID(text.strip()))
        except ValueError:
            raise StorageError(f"domain token holds {text.strip()[:60]!r}, "
                               "not a UUID", host=self.host, path=path) from None

    def ensure_token(self, directory: str) -> str:
        """Read the domain token, creating it first if no host has yet;
        then write this host's marker."""
        path = os.path.join(directory, DOMAIN_TOKEN)
        fresh = f"{uuidlib.uuid4()}\n"
        self.call("create domain token", path,
                  lambda: self.ops.create_exclusive(path, fresh))
        token = self.read_token(directory)
        if token is None:
            raise StorageError("domain token vanished right after it was "
                               "created", host=self.host, path=path)
        marker = os.path.join(directory, HOST_MARKER + self.host)
        self.call("write host marker", marker,
                  lambda: self.ops.write_text(marker, token + "\n"))
        return token

    def hosts_seen(self, directory: str, token: str) -> tuple[str, ...]:
        """Hosts whose marker in ``directory`` holds ``token``. The directory
        is touched first: on NFS that refreshes the client's view of it."""
        self.call("touch", directory, lambda: self.ops.touch(directory))
        names = self.call("list", directory, lambda: self.ops.listdir(directory))
        seen = []
        for name in sorted(names):
            if not name.startswith(HOST_MARKER):
                continue
            marker = os.path.join(directory, name)
            try:
                text = self.call("read host marker", marker,
                                 lambda: self.ops.read_text(marker))
            except PathNotFound:    # removed since the listing
                continue
            if text.strip() == token:
                seen.append(name[len(HOST_MARKER):])
        return tuple(seen)
