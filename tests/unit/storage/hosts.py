"""Fixture hosts: a mountinfo fixture plus a fake filesystem that agrees
with it, and a discover call for one host."""

from __future__ import annotations

import pathlib

from scheduler_ext.storage import discover as se_discover
from scheduler_ext.storage.probe import Probe
from tests.unit.storage.fakefs import FakeHost, Storage

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
ROOT_DEV, NOVA_DEV = (252, 1), (252, 2)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def host_with(mount_point: str, storage: Storage, device: tuple[int, int],
              root: str = "/", **kw) -> FakeHost:
    """The base fixture's root and /var/lib/nova, plus ``storage`` mounted
    at ``mount_point``."""
    mounts = {"/": (Storage(dirs=["/tmp", "/gpfs1", "/srv", "/mnt"]), "/", ROOT_DEV),
              "/var/lib/nova": (Storage(dirs=["/instances"]), "/", NOVA_DEV)}
    if mount_point:
        mounts[mount_point] = (storage, root, device)
    return FakeHost(mounts, **kw)


def discover(fake: FakeHost, mountinfo_fixture: str, path: str, host="cn1",
             fstab: str = "", timeout: float = 5.0, **kw):
    probe = Probe(host, timeout, fake.ops())
    tables = se_discover.Tables(fixture(f"{mountinfo_fixture}.mountinfo"),
                                fixture(fstab) if fstab else "",
                                mountinfo_fixture, fstab)
    return se_discover.discover(probe, path, tables, **kw)
