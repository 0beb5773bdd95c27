"""Where a path lives: ``/proc/self/mountinfo`` and ``/etc/fstab`` parsed per
their documented formats, and the mount a path resolves to.

mountinfo (proc_pid_mountinfo(5)) has one line per mount::

    36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
    (1)(2)(3)   (4)   (5)      (6)    (7...)  (8) (9)   (10)      (11)

mount id, parent id, ``major:minor`` (the ``st_dev`` of files on it), the
root of the mount inside its filesystem (not ``/`` for bind mounts and
subdirectory mounts), the mount point, per-mount options, zero or more
optional fields (``shared:N``, ``master:N``...), a lone ``-``, then the
filesystem type (``type[.subtype]``), the mount source and the
per-superblock options. Space, tab, newline and backslash inside a field are
written as the octal escapes ``\\040``, ``\\011``, ``\\012`` and ``\\134``.

A mount stacked on an existing mount point hides it; its parent is the mount
it hides, so the visible one at a point is the one that is not the parent of
another mount there (with well-formed input, the last line for that point).
A mount whose attachment is hidden by a later mount on a shorter path is
hidden too.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re

from scheduler_ext.storage.errors import MountinfoError

_OCTAL = re.compile(r"\\([0-7]{3})")
_DEVICE = re.compile(r"^(\d+):(\d+)$")


def unescape(field: str) -> str:
    """Undo the kernel's octal escapes (``\\040`` -> space). A byte >= 128
    comes back as its ``surrogateescape`` character, as ``os.fsdecode``
    would give it."""
    def one(match: re.Match) -> str:
        code = int(match.group(1), 8)
        return chr(code) if code < 128 else chr(0xDC00 + code)
    return _OCTAL.sub(one, field)


@dataclasses.dataclass(frozen=True)
class MountEntry:
    """One line of mountinfo, unescaped. ``line`` is its 1-based number."""

    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str
    mount_point: str
    options: str
    optional: tuple[str, ...]
    fstype: str
    source: str
    super_options: str
    line: int = 0

    @property
    def device(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def option(self, name: str) -> str | None:
        """The value of ``name=value`` (or ``""`` for a bare flag) in the
        per-mount or superblock options; None when absent."""
        for opt in (self.super_options + "," + self.options).split(","):
            key, _, value = opt.partition("=")
            if key == name:
                return value
        return None


def parse_line(line: str, number: int = 0, *, host: str = "",
               source: str = "mountinfo") -> MountEntry:
    """One mountinfo line; MountinfoError naming the host, the file and the
    line when it does not follow the format."""
    def bad(why: str) -> MountinfoError:
        return MountinfoError(f"{source} line {number}: {why}: {line!r}",
                              host=host)
    fields = line.split()
    try:
        sep = fields.index("-", 6)
    except ValueError:
        raise bad("no ' - ' separator after the sixth field") from None
    if len(fields) - sep - 1 != 3:
        raise bad(f"expected 3 fields after ' - ', found {len(fields) - sep - 1}")
    if not (fields[0].isdigit() and fields[1].isdigit()):
        raise bad("mount id and parent id must be integers")
    device = _DEVICE.match(fields[2])
    if device is None:
        raise bad(f"device {fields[2]!r} is not major:minor")
    mount_point = unescape(fields[4])
    if not mount_point.startswith("/"):
        raise bad(f"mount point {mount_point!r} is not absolute")
    fstype = unescape(fields[sep + 1])
    if not fstype:
        raise bad("empty filesystem type")
    return MountEntry(
        int(fields[0]), int(fields[1]), int(device.group(1)),
        int(device.group(2)), unescape(fields[3]), mount_point,
        unescape(fields[5]), tuple(fields[6:sep]), fstype,
        unescape(fields[sep + 2]), unescape(fields[sep + 3]), number)


def parse(text: str, *, host: str = "",
          source: str = "/proc/self/mountinfo") -> list[MountEntry]:
    """Every line of a mountinfo text (blank lines skipped)."""
    return [parse_line(line, i, host=host, source=source)
            for i, line in enumerate(text.splitlines(), 1) if line.strip()]


def visible(entries: list[MountEntry]) -> list[MountEntry]:
    """The mounts a path lookup can reach: the top of each stack, and only
    if the mount it is attached to is itself reachable."""
    by_id = {e.mount_id: e for e in entries}
    parents_at: dict[str, set[int]] = {}
    for e in entries:
        parent = by_id.get(e.parent_id)
        if parent is not None and parent is not e \
                and parent.mount_point == e.mount_point:
            parents_at.setdefault(e.mount_point, set()).add(parent.mount_id)
    top: dict[str, MountEntry] = {}
    for e in entries:   # file order: a later top-most entry wins a tie
        if e.mount_id not in parents_at.get(e.mount_point, set()):
            top[e.mount_point] = e
    memo: dict[int, bool] = {}

    def reachable(e: MountEntry, depth: int = 0) -> bool:
        if e.mount_id in memo:
            return memo[e.mount_id]
        base = e   # the bottom of e's stack: where the stack is attached
        seen = {e.mount_id}
        while (p := by_id.get(base.parent_id)) is not None and \
                p.mount_point == e.mount_point and p.mount_id not in seen:
            base = p
            seen.add(p.mount_id)
        attach = by_id.get(base.parent_id)
        ok = (top.get(e.mount_point) is e and
              (attach is None or attach is base or depth > len(entries)
               or reachable(attach, depth + 1)))
        memo[e.mount_id] = ok
        return ok
    return [e for e in top.values() if reachable(e)]


def covers(mount_point: str, path: str) -> bool:
    """True when ``path`` is ``mount_point`` or below it, by whole path
    components (``/gpfs1`` covers ``/gpfs1/x``, not ``/gpfs10``)."""
    if mount_point == "/":
        return path.startswith("/")
    return path == mount_point or path.startswith(mount_point.rstrip("/") + "/")


def resolve(path: str, entries: list[MountEntry]) -> MountEntry | None:
    """The visible mount holding the absolute, normalized ``path``: the
    longest mount point covering it by whole components."""
    best: MountEntry | None = None
    for e in visible(entries):
        if covers(e.mount_point, path) and (
                best is None or len(e.mount_point) > len(best.mount_point)):
            best = e
    return best


def location(entry: MountEntry, path: str) -> str:
    """Where ``path`` is inside the mounted filesystem: the mount's root
    (a bind mount's source directory) joined with the rest of the path."""
    rest = path[len(entry.mount_point):].lstrip("/") \
        if entry.mount_point != "/" else path.lstrip("/")
    root = entry.root if entry.root.startswith("/") else "/"
    return posixpath.normpath(posixpath.join(root, rest))


@dataclasses.dataclass(frozen=True)
class FstabEntry:
    """One filesystem line of fstab(5): spec, file, vfstype, mntops."""

    source: str
    mount_point: str
    fstype: str
    options: str
    line: int = 0

    @property
    def is_bind(self) -> bool:
        """A bind mount (``bind``/``rbind`` option, type ``none`` or any)."""
        return bool({"bind", "rbind"} & set(self.options.split(",")))


def parse_fstab(text: str, *, host: str = "",
                source: str = "/etc/fstab") -> list[FstabEntry]:
    """Filesystem lines of an fstab text; comments and blank lines are
    skipped; fields use the same octal escapes as mountinfo."""
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if not 4 <= len(fields) <= 6:
            raise MountinfoError(
                f"{source} line {number}: expected 4 to 6 fields, found "
                f"{len(fields)}: {raw!r}", host=host)
        mount_point = unescape(fields[1])
        if fields[2] == "swap" or mount_point in ("none", "swap"):
            continue
        if mount_point.startswith("/"):     # "/gpfs1/" is "/gpfs1"
            mount_point = posixpath.normpath(mount_point)
            mount_point = "/" + mount_point.lstrip("/")
        out.append(FstabEntry(unescape(fields[0]), mount_point,
                              unescape(fields[2]), unescape(fields[3]), number))
    return out
