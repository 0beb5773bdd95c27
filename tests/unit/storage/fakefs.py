"""A filesystem for the probe without mounting anything: storages (each a
tree of directories and files with a size) mounted on hosts at mount
points, with a mount root (bind mounts) and a device number. Two hosts
mounting one ``Storage`` see each other's files, as on a shared filesystem.
"""

from __future__ import annotations

import os
import posixpath
import stat as stat_mod
import threading
import types

from scheduler_ext.storage.probe import FsOps

GiB = 1024 ** 3


class Storage:
    """One filesystem: directories and files by their path inside it."""

    def __init__(self, total_gib: int = 1000, free_gib: int = 600,
                 available_gib: int | None = None, dirs=("/",)):
        self.total, self.free = total_gib * GiB, free_gib * GiB
        self.available = (free_gib if available_gib is None else available_gib) * GiB
        self.dirs = {"/"}
        for d in dirs:
            self.mkdirs(d)
        self.files: dict[str, str] = {}

    def mkdirs(self, path: str) -> "Storage":
        parts = [p for p in path.split("/") if p]
        for i in range(len(parts) + 1):
            self.dirs.add("/" + "/".join(parts[:i]))
        return self


class FakeHost:
    """Mounts: mount point -> (storage, root inside it, (major, minor)).
    ``hang`` names calls ("statvfs", "stat", ...) that block until
    ``release`` is set; ``symlinks`` maps a path to its target."""

    def __init__(self, mounts, symlinks=None, hang=()):
        self.mounts = dict(mounts)
        self.symlinks = dict(symlinks or {})
        self.hang = set(hang)
        self.release = threading.Event()

    def _where(self, path: str):
        best = None
        for mp in self.mounts:
            if mp == "/" or path == mp or path.startswith(mp + "/"):
                if best is None or len(mp) > len(best):
                    best = mp
        storage, root, dev = self.mounts[best]
        rest = path[len(best):].lstrip("/") if best != "/" else path.lstrip("/")
        return storage, posixpath.normpath(posixpath.join(root, rest)), dev

    def _block(self, call: str) -> None:
        if call in self.hang:
            self.release.wait(60)

    def realpath(self, path):
        for link, target in self.symlinks.items():
            if path == link or path.startswith(link + "/"):
                return target + path[len(link):]
        return path

    def stat(self, path):
        self._block("stat")
        storage, inner, dev = self._where(path)
        if inner in storage.dirs:
            mode = stat_mod.S_IFDIR | 0o755
        elif inner in storage.files:
            mode = stat_mod.S_IFREG | 0o644
        else:
            raise FileNotFoundError(2, "No such file or directory", path)
        return types.SimpleNamespace(st_mode=mode, st_dev=os.makedev(*dev))

    def statvfs(self, path):
        self._block("statvfs")
        storage, inner, _ = self._where(path)
        if inner not in storage.dirs:
            raise FileNotFoundError(2, "No such file or directory", path)
        return types.SimpleNamespace(
            f_frsize=4096, f_bsize=4096, f_blocks=storage.total // 4096,
            f_bfree=storage.free // 4096, f_bavail=storage.available // 4096)

    def listdir(self, path):
        storage, inner, _ = self._where(path)
        names = {p[len(inner):].lstrip("/").split("/")[0]
                 for p in list(storage.files) + list(storage.dirs)
                 if p != inner and p.startswith(inner.rstrip("/") + "/")}
        return sorted(names)

    def touch(self, path):
        self.stat(path)

    def read_text(self, path):
        self._block("read")
        storage, inner, _ = self._where(path)
        if inner not in storage.files:
            raise FileNotFoundError(2, "No such file or directory", path)
        return storage.files[inner]

    def write_text(self, path, text):
        storage, inner, _ = self._where(path)
        if posixpath.dirname(inner) not in storage.dirs:
            raise FileNotFoundError(2, "No such file or directory", path)
        storage.files[inner] = text

    def create_exclusive(self, path, text):
        storage, inner, _ = self._where(path)
        if inner in storage.files:
            return False
        self.write_text(path, text)
        return True

    def ops(self) -> FsOps:
        return FsOps(realpath=self.realpath, stat=self.stat,
                     statvfs=self.statvfs, listdir=self.listdir,
                     touch=self.touch, read_text=self.read_text,
                     write_text=self.write_text,
                     create_exclusive=self.create_exclusive)
