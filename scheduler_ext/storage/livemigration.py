"""The live-migration type nova's libvirt driver will choose, from the
storage facts, before anyone tries.

Nova's rules (libvirt driver, ``check_can_live_migrate_source`` and
``_is_shared_block_storage``), as facts:

* *shared instance path*: the source sees a file the destination created in
  its instances path. Here: both hosts report the path ``shared`` in the
  same storage domain (confirmed by the domain token).
* *shared block storage*: (a) both hosts use the ``rbd`` image backend; or
  (b) the instance path is shared and the backend keeps disks as files in
  it (``qcow2``, ``raw``/flat); or (c) the server boots from a volume and
  has no local disk at all. A config drive is a local disk unless the
  backend is ``rbd`` (nova then imports it into Ceph); with ``lvm`` the
  root, ephemeral and swap disks are logical volumes and the config drive
  is a raw file in the instance path.
* Requested ``auto``: block migration exactly when neither is shared.
* Block migration on shared storage: ``InvalidLocalStorage``. Block
  migration with mapped volumes while tunnelling: ``MigrationPreCheckError``
  (libvirt cannot copy selected disks through the tunnel).
* No block migration and nothing shared: ``InvalidSharedStorage``.
* What a block migration copies: the local file and block disks that are
  writable and are not volumes (``_live_migration_copy_disk_paths``). The
  iso9660 config drive is a read-only CD-ROM: it is not copied. Disks in
  Ceph (``rbd``) are network disks and are not copied.
* Tunnelled (``[libvirt] live_migration_tunnelled``), nova passes no disk
  list (``_live_migration_operation``) and ``Guest.migrate`` then drops
  ``VIR_MIGRATE_NON_SHARED_INC``: nothing is copied, since nova 17.0.0
  (nova's ``test_block_live_migration_tunnelled_migrateToURI3`` expects
  exactly that). A block migration with local disks is then a hazard.
* libvirt: nova 34's ``init_host`` refuses libvirt older than 8.0.0. Older
  nova refused a block migration with mapped volumes on libvirt older than
  1.2.17 ("Selective block device migration feature requires libvirt
  version 1.2.17"): without selective block migration libvirt copies the
  volumes onto themselves (bug 1398999).
* A path one host reports ``unconfirmed``: nova decides with its own test
  file, which the reports cannot predict; the decision assumes not shared
  and says so (a hazard).
"""

from __future__ import annotations

import dataclasses
import enum

FILE_BACKENDS = ("qcow2", "raw")
BACKENDS = FILE_BACKENDS + ("lvm", "rbd")
CONFIG_DRIVE_FORMATS = ("vfat", "iso9660")


class Hazard(str, enum.Enum):
    """A risk nova does not refuse (see ``HAZARD_TEXT``)."""

    CONFIG_DRIVE_003 = "volume-backed-local-config-drive"
    LVM_SHARED_PATH = "lvm-on-shared-path"
    ISO9660_BLOCK = "iso9660-config-drive-block-migration"
    LOST_MOUNT = "lost-mount"
    BACKEND_MISMATCH = "image-backend-mismatch"
    TUNNELLED_NO_COPY = "tunnelled-block-migration-copies-nothing"
    UNCONFIRMED_PATH = "unconfirmed-instance-path"
    OLD_LIBVIRT = "libvirt-older-than-nova-34-supports"


HAZARD_TEXT = {
    Hazard.CONFIG_DRIVE_003:
        "volume-backed server with a local config drive on non-shared "
        "storage: nova counts the config drive as a local disk, so the "
        "migration is a block migration of that one file (it fails when "
        "tunnelled and when block migration is refused)",
    Hazard.LVM_SHARED_PATH:
        "LVM image backend on a shared instance path: the logical volumes "
        "are local to the source, but nova sees shared storage and copies "
        "nothing",
    Hazard.ISO9660_BLOCK:
        "iso9660 config drive in a block migration: the read-only CD-ROM is "
        "not among the disks libvirt copies; the destination's disk.config "
        "must come from elsewhere (use vfat, or shared storage)",
    Hazard.LOST_MOUNT:
        "an instances path is a lost mount (its shared filesystem is not "
        "mounted): treated as local storage",
    Hazard.BACKEND_MISMATCH:
        "source and destination use different image backends",
    Hazard.TUNNELLED_NO_COPY:
        "tunnelled block migration: nova passes no disk list and libvirt "
        "then copies no disk at all (nova >= 17.0.0); the destination "
        "starts without the local disks listed",
    Hazard.UNCONFIRMED_PATH:
        "an instances path is unconfirmed: nova's own test file decides "
        "whether it is shared; if it is, nova copies nothing (and refuses a "
        "requested block migration)",
    Hazard.OLD_LIBVIRT:
        "libvirt older than 8.0.0: nova 34's nova-compute does not start "
        "(init_host); the decision is the one older nova made",
}

#: nova 34's minimum libvirt (``MIN_LIBVIRT_VERSION``)
MIN_LIBVIRT = (8, 0, 0)
#: selective block device migration (``migrate_disks``)
SELECTIVE_BLOCK_LIBVIRT = (1, 2, 17)


@dataclasses.dataclass(frozen=True)
class HostStorage:
    """A host's side: the state and domain of its instances path (from its
    report) and nova's ``[libvirt] images_type`` there."""

    host: str
    path_state: str          # shared, local, lost-mount, unconfirmed
    domain: str | None
    images_type: str = "qcow2"


@dataclasses.dataclass(frozen=True)
class InstanceDisks:
    """``volume_backed``: the root disk is a volume. ``volumes``: other
    volumes attached. ``config_drive``: None, vfat or iso9660."""

    volume_backed: bool = False
    volumes: int = 0
    config_drive: str | None = None
    ephemeral: int = 0
    swap: bool = False

    def __post_init__(self) -> None:
        if self.config_drive not in (None,) + CONFIG_DRIVE_FORMATS:
            raise ValueError(f"config_drive={self.config_drive!r}: not one of "
                             f"{', '.join(CONFIG_DRIVE_FORMATS)} or None")
        if self.volumes < 0 or self.ephemeral < 0:
            raise ValueError("volumes and ephemeral must be >= 0")


@dataclasses.dataclass(frozen=True)
class Decision:
    """``kind``: ``no-copy``, ``block`` (copying ``copies``) or ``error``
    (nova's exception class in ``error``, its reason in ``reason``)."""

    kind: str
    copies: tuple[str, ...] = ()
    error: str | None = None
    reason: str = ""
    shared_instance_path: bool = False
    shared_block_storage: bool = False
    hazards: tuple[Hazard, ...] = ()
    source: str = "check_can_live_migrate_source"   # nova's function deciding

    def summary(self) -> str:
        if self.kind == "error":
            return str(self.error)
        if self.kind == "block":
            return "block: " + (", ".join(self.copies) or "nothing")
        return "no copy"


def local_disks(disks: InstanceDisks, backend: str) -> list[tuple[str, bool]]:
    """(disk name, copied by a block migration) of the disks nova's disk
    info lists on the source: local files and block devices, no volumes."""
    if backend == "rbd":
        return []
    out = []
    if not disks.volume_backed:
        out.append(("disk", True))
    names = (["disk.local"] if disks.ephemeral == 1 else
             [f"disk.eph{i}" for i in range(disks.ephemeral)])
    out += [(n, True) for n in names]
    if disks.swap:
        out.append(("disk.swap", True))
    if disks.config_drive:
        out.append(("disk.config", disks.config_drive == "vfat"))
    return out


def _hazards(src: HostStorage, dst: HostStorage, disks: InstanceDisks,
             shared_path: bool, block: bool) -> tuple[Hazard, ...]:
    found = []
    local_config = disks.config_drive is not None and src.images_type != "rbd"
    if disks.volume_backed and local_config and not shared_path:
        found.append(Hazard.CONFIG_DRIVE_003)
    lvs = (not disks.volume_backed) or disks.ephemeral or disks.swap
    if src.images_type == "lvm" and shared_path and lvs:
        found.append(Hazard.LVM_SHARED_PATH)
    if block and disks.config_drive == "iso9660" and src.images_type != "rbd":
        found.append(Hazard.ISO9660_BLOCK)
    if "lost-mount" in (src.path_state, dst.path_state):
        found.append(Hazard.LOST_MOUNT)
    if src.images_type != dst.images_type:
        found.append(Hazard.BACKEND_MISMATCH)
    if "unconfirmed" in (src.path_state, dst.path_state):
        found.append(Hazard.UNCONFIRMED_PATH)
    return tuple(found)


def plan(src: HostStorage, dst: HostStorage, disks: InstanceDisks,
         block_migration: bool | None = None,
         tunnelled: bool = False,
         libvirt_version: tuple[int, ...] = MIN_LIBVIRT) -> Decision:
    """What nova does for this live migration (``block_migration`` None is
    the API's ``auto``; ``libvirt_version`` of the hosts)."""
    for side in (src, dst):
        if side.images_type not in BACKENDS:
            raise ValueError(f"host {side.host}: images_type "
                             f"{side.images_type!r} is not one of {BACKENDS}")
    shared_path = (src.path_state == dst.path_state == "shared" and
                   src.domain is not None and src.domain == dst.domain)
    disk_info = local_disks(disks, src.images_type)
    shared_block = (
        (src.images_type == dst.images_type == "rbd")
        or (shared_path and src.images_type in FILE_BACKENDS)
        or (disks.volume_backed and not disk_info))
    on_shared = shared_path or shared_block
    block = (not on_shared) if block_migration is None else block_migration
    hazards = _hazards(src, dst, disks, shared_path, block)
    if libvirt_version < MIN_LIBVIRT:
        hazards += (Hazard.OLD_LIBVIRT,)
    base = Decision("no-copy", shared_instance_path=shared_path,
                    shared_block_storage=shared_block, hazards=hazards)
    mapped = disks.volume_backed or disks.volumes
    if block:
        if on_shared:
            return dataclasses.replace(
                base, kind="error", error="InvalidLocalStorage",
                reason="Block migration can not be used with shared storage.")
        if mapped and libvirt_version < SELECTIVE_BLOCK_LIBVIRT:
            return dataclasses.replace(
                base, kind="error", error="MigrationPreCheckError",
                source="check_can_live_migrate_source (nova 13)",
                reason="Cannot block migrate instance with mapped volumes. "
                       "Selective block device migration feature requires "
                       "libvirt version 1.2.17 (without it the volumes are "
                       "copied onto themselves, bug 1398999)")
        if tunnelled and mapped:
            return dataclasses.replace(
                base, kind="error", error="MigrationPreCheckError",
                reason="selective block device migration is not supported "
                       "with tunnelled block migrations (the server has "
                       "mapped volumes)")
        copies = tuple(name for name, copied in disk_info if copied)
        if tunnelled:
            return dataclasses.replace(
                base, kind="block", copies=(), hazards=base.hazards + (
                    (Hazard.TUNNELLED_NO_COPY,) if copies else ()),
                source="_live_migration_operation, Guest.migrate")
        return dataclasses.replace(base, kind="block", copies=copies,
                                   source="_live_migration_copy_disk_paths")
    if not on_shared:
        return dataclasses.replace(
            base, kind="error", error="InvalidSharedStorage",
            reason="shared storage live-migration requires either shared "
                   "storage or boot-from-volume with no local disks")
    return base
