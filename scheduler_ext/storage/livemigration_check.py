"""The live-migration decision for a real server: its disks from nova's
compute API, both hosts' storage reports, and the compute hosts' nova.conf
(``[libvirt] images_type``, ``live_migration_tunnelled``, ``[DEFAULT]
config_drive_format``, ``use_cow_images``) when given."""

from __future__ import annotations

import configparser
import dataclasses
from typing import Mapping, Sequence

from scheduler_ext.storage import compute_api, livemigration
from scheduler_ext.storage.errors import StorageError
from scheduler_ext.storage.report import HostReport

#: nova's [libvirt] images_type -> the backend the decision knows
IMAGES_TYPES = {"qcow2": "qcow2", "raw": "raw", "flat": "raw",
                "lvm": "lvm", "rbd": "rbd"}


@dataclasses.dataclass(frozen=True)
class ComputeConf:
    """What a compute host's nova.conf says about live migration (nova's
    defaults when no file is given)."""

    images_type: str = "qcow2"
    tunnelled: bool = False
    config_drive_format: str = "iso9660"


def compute_conf(text: str, origin: str = "nova.conf") -> ComputeConf:
    """The options of a compute host's nova.conf text; StorageError naming
    the file and option for a value nova would refuse."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text, source=origin)
    except configparser.Error as exc:
        raise StorageError(f"{origin}: not an INI file: "
                           f"{str(exc).splitlines()[0]}") from None

    def get(section: str, key: str, default: str) -> str:
        if section == "DEFAULT":
            return parser.defaults().get(key, default).strip()
        return parser.get(section, key, fallback=default).strip()

    images_type = get("libvirt", "images_type", "default").lower()
    if images_type == "default":
        cow = get("DEFAULT", "use_cow_images", "true").lower()
        images_type = "qcow2" if cow in ("true", "1", "yes", "on") else "raw"
    if images_type not in IMAGES_TYPES:
        raise StorageError(f"{origin}: [libvirt] images_type {images_type!r} "
                           f"is not one of default, {', '.join(IMAGES_TYPES)}")
    tunnelled = get("libvirt", "live_migration_tunnelled", "false").lower()
    drive = get("DEFAULT", "config_drive_format", "iso9660").lower()
    if drive not in livemigration.CONFIG_DRIVE_FORMATS:
        raise StorageError(f"{origin}: [DEFAULT] config_drive_format {drive!r} "
                           f"is not one of "
                           f"{', '.join(livemigration.CONFIG_DRIVE_FORMATS)}")
    return ComputeConf(IMAGES_TYPES[images_type],
                       tunnelled in ("true", "1", "yes", "on"), drive)


def instance_disks(srv: Mapping, attachments: Sequence[Mapping],
                   config_drive_format: str) -> livemigration.InstanceDisks:
    """A server's disks from the compute API: volume-backed when it has no
    image; its flavor's ephemeral and swap; a config drive in the source
    host's format."""
    volume_backed = not srv.get("image")
    flavor = srv.get("flavor") or {}
    drive = str(srv.get("config_drive", "")).lower() in ("true", "1", "yes")
    volumes = len(attachments) - (1 if volume_backed and attachments else 0)
    return livemigration.InstanceDisks(
        volume_backed=volume_backed, volumes=max(volumes, 0),
        config_drive=config_drive_format if drive else None,
        ephemeral=1 if flavor.get("ephemeral") else 0,
        swap=bool(flavor.get("swap")))


def host_storage(host: str, reports: Mapping[str, HostReport],
                 conf: ComputeConf) -> livemigration.HostStorage:
    report = reports.get(host)
    if report is None:
        raise StorageError(f"no storage report for host {host} (give "
                           f"'storage discover' output of {host})", host=host)
    return livemigration.HostStorage(host, report.state, report.domain,
                                     conf.images_type)


@dataclasses.dataclass(frozen=True)
class Check:
    server: str
    source: str
    destination: str
    disks: livemigration.InstanceDisks
    decision: livemigration.Decision


def check(api: compute_api.ComputeEndpoint, server_id: str, destination: str,
          reports: Mapping[str, HostReport], *,
          source_conf: ComputeConf = ComputeConf(),
          destination_conf: ComputeConf = ComputeConf(),
          block_migration: bool | None = None,
          libvirt_version: tuple[int, ...] = livemigration.MIN_LIBVIRT) -> Check:
    """What nova will do live-migrating ``server_id`` to ``destination``
    (reads the server and its volume attachments)."""
    srv = compute_api.server(api, server_id)
    source = compute_api.host_of(srv)
    if source == destination:
        raise StorageError(f"server {server_id} is already on {destination}")
    disks = instance_disks(srv, compute_api.volume_attachments(api, server_id),
                           source_conf.config_drive_format)
    decision = livemigration.plan(
        host_storage(source, reports, source_conf),
        host_storage(destination, reports, destination_conf), disks,
        block_migration, source_conf.tunnelled, libvirt_version)
    return Check(server_id, source, destination, disks, decision)
