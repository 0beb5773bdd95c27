"""The live-migration decision table: every row of the table in
doc/source/operating.rst ("Live migration") is a case here, so the docs and
the planner cannot drift apart."""

import pathlib
import re

import pytest

from scheduler_ext.storage import livemigration as lm
from scheduler_ext.storage.livemigration import Hazard, HostStorage, InstanceDisks

OPERATING = pathlib.Path(__file__).resolve().parents[3] / "doc/source/operating.rst"
HAZARDS = {"003": Hazard.CONFIG_DRIVE_003, "iso9660": Hazard.ISO9660_BLOCK,
           "lvm": Hazard.LVM_SHARED_PATH, "lost": Hazard.LOST_MOUNT,
           "backends": Hazard.BACKEND_MISMATCH, "tunnel": Hazard.TUNNELLED_NO_COPY,
           "unconfirmed": Hazard.UNCONFIRMED_PATH, "old-libvirt": Hazard.OLD_LIBVIRT}
DOMAIN = "gpfs:gpfs1:/pool/instances"


def table_rows():
    """The rows of the decision table (an RST simple table) in the docs."""
    lines = OPERATING.read_text().splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("==  ") and "nova does" in lines[i + 1])
    border = lines[start]
    spans = [m.span() for m in re.finditer(r"=+", border)]
    rows = []
    for line in lines[start + 3:]:
        if line == border:
            break
        cells = [line[a:(spans[i + 1][0] if i + 1 < len(spans) else None)].strip()
                 for i, (a, _) in enumerate(spans)]
        rows.append(cells)
    return rows


ROWS = table_rows()


def hosts(path, backend):
    src_backend, _, dst_backend = backend.partition("/")
    dst_backend = dst_backend or src_backend
    states = {"shared": (("shared", DOMAIN), ("shared", DOMAIN)),
              "other": (("shared", DOMAIN), ("shared", "nfs:filer:/nova")),
              "local": (("local", None), ("local", None)),
              "lost": (("lost-mount", None), ("local", None)),
              "unconf": (("shared", DOMAIN), ("unconfirmed", None))}[path]
    return (HostStorage("src", *states[0], images_type=src_backend),
            HostStorage("dst", *states[1], images_type=dst_backend))


def disks(spec):
    items = spec.split(",")
    drive = next((i for i in items if i in ("vfat", "iso9660")), None)
    return InstanceDisks(volume_backed="boot-volume" in items,
                         volumes=items.count("volume"), config_drive=drive,
                         ephemeral=items.count("eph"), swap="swap" in items)


def test_the_table_has_every_row():
    assert [int(r[0]) for r in ROWS] == list(range(1, 35))


@pytest.mark.parametrize("row", ROWS, ids=[f"row{r[0]}" for r in ROWS])
def test_decision_table_row(row):
    _, path, backend, disk_spec, block, tunnel, libvirt, expected, hazards, \
        source = row
    src, dst = hosts(path, backend)
    requested = {"auto": None, "true": True, "false": False}[block]
    version = lm.MIN_LIBVIRT if libvirt == "-" else \
        tuple(int(x) for x in libvirt.split("."))
    decision = lm.plan(src, dst, disks(disk_spec), requested, tunnel == "yes",
                       version)
    assert decision.summary() == expected
    want = set() if hazards == "-" else {HAZARDS[h] for h in hazards.split(",")}
    assert set(decision.hazards) == want
    assert decision.source == source


def test_tunnelled_block_migration_copies_nothing_as_nova_17_and_later():
    """Row 10 used to say "block: disk"; nova passes no disk list when
    tunnelled and Guest.migrate drops VIR_MIGRATE_NON_SHARED_INC."""
    src, dst = hosts("local", "raw")
    d = lm.plan(src, dst, InstanceDisks(), None, tunnelled=True)
    assert (d.kind, d.copies) == ("block", ())
    assert Hazard.TUNNELLED_NO_COPY in d.hazards


def test_the_seeds_error_on_libvirt_older_than_1_2_17():
    src, dst = hosts("local", "qcow2")
    d = lm.plan(src, dst, InstanceDisks(volume_backed=True, config_drive="vfat"),
                None, libvirt_version=(1, 2, 16))
    assert d.error == "MigrationPreCheckError"
    assert "requires libvirt version 1.2.17" in d.reason
    assert "bug 1398999" in d.reason


def test_errors_carry_novas_reason_and_hazards_have_text():
    src, dst = hosts("local", "qcow2")
    d = lm.plan(src, dst, InstanceDisks(volume_backed=True, config_drive="vfat"),
                False)
    assert d.error == "InvalidSharedStorage" and "boot-from-volume" in d.reason
    assert not (d.shared_block_storage or d.shared_instance_path)
    assert all(lm.HAZARD_TEXT[h] for h in Hazard)


def test_bad_inputs_are_refused():
    src, dst = hosts("local", "qcow2")
    with pytest.raises(ValueError, match="config_drive='udf'"):
        InstanceDisks(config_drive="udf")
    with pytest.raises(ValueError, match="host src: images_type 'ploop'"):
        lm.plan(HostStorage("src", "local", None, "ploop"), dst, InstanceDisks())
