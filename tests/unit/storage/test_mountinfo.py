"""mountinfo and fstab parsing per proc_pid_mountinfo(5) and fstab(5), and
which mount a path resolves to."""

import pathlib

import pytest

from scheduler_ext.storage import mountinfo
from scheduler_ext.storage.errors import MountinfoError

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def entries(name):
    return mountinfo.parse((FIXTURES / f"{name}.mountinfo").read_text(),
                           host="cn1")


def test_documented_example_line_parses_field_by_field():
    e = mountinfo.parse_line("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - "
                             "ext3 /dev/root rw,errors=continue")
    assert (e.mount_id, e.parent_id, e.device) == (36, 35, (98, 0))
    assert (e.root, e.mount_point, e.options) == ("/mnt1", "/mnt2", "rw,noatime")
    assert e.optional == ("master:1",)
    assert (e.fstype, e.source, e.super_options) == ("ext3", "/dev/root",
                                                     "rw,errors=continue")
    assert e.option("errors") == "continue" and e.option("noatime") == ""
    assert e.option("absent") is None


@pytest.mark.parametrize("optional", ["", "shared:45", "shared:45 master:12 "
                                      "propagate_from:3 unbindable"])
def test_zero_or_many_optional_fields_end_at_the_separator(optional):
    line = f"40 22 0:45 / /gpfs1 rw,relatime {optional} - gpfs gpfs1 rw"
    e = mountinfo.parse_line(" ".join(line.split()))
    assert e.optional == tuple(optional.split())
    assert (e.fstype, e.source) == ("gpfs", "gpfs1")


def test_octal_escapes_for_space_tab_newline_and_backslash():
    assert mountinfo.unescape(r"a\040b\011c\012d\134e") == "a b\tc\nd\\e"
    e = entries("escaped")[-1]
    assert e.mount_point == "/mnt/nova shared"
    assert e.source == "filer02:/export/with space\\dir"


def test_a_line_without_separator_is_an_error_naming_host_file_and_line():
    with pytest.raises(MountinfoError) as exc:
        entries("broken")
    text = str(exc.value)
    assert "host cn1" in text and "line 2" in text and "separator" in text
    assert exc.value.host == "cn1"


@pytest.mark.parametrize("line, why", [
    ("x 22 0:45 / /g rw - gpfs g rw", "integers"),
    ("40 22 045 / /g rw - gpfs g rw", "major:minor"),
    ("40 22 0:45 / g rw - gpfs g rw", "not absolute"),
    ("40 22 0:45 / /g rw - gpfs g", "3 fields"),
    ("40 22 0:45 / /g rw - gpfs g rw extra", "3 fields"),
])
def test_malformed_lines_say_what_is_wrong(line, why):
    with pytest.raises(MountinfoError, match=why):
        mountinfo.parse_line(line, 7, host="cn2", source="mi")


def test_longest_match_is_by_whole_path_components():
    table = entries("gpfs_pool_subdir")
    assert mountinfo.resolve("/gpfs1/pool/instances", table).source == "gpfs1"
    assert mountinfo.resolve("/gpfs10/pool", table).source == "gpfs10"
    assert mountinfo.resolve("/gpfs100", table).mount_point == "/"
    assert mountinfo.resolve("/var/lib/nova/instances", table).fstype == "xfs"


def test_a_stacked_mount_hides_the_one_below():
    table = entries("stacked")
    assert mountinfo.resolve("/var/lib/nova/instances/x", table).fstype == "nfs4"
    # the same two mounts the other way round: the top of the stack is the
    # one that is no other mount's parent there, whatever the line order
    lines = (FIXTURES / "stacked.mountinfo").read_text().splitlines()
    swapped = "\n".join(lines[:-2] + [lines[-1], lines[-2]])
    assert mountinfo.resolve("/var/lib/nova/instances",
                             mountinfo.parse(swapped)).fstype == "nfs4"


def test_last_mount_wins_when_parents_do_not_tell():
    text = ("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
            "2 1 0:40 / /data rw - nfs4 a:/x rw\n"
            "3 1 0:41 / /data rw - nfs4 b:/y rw\n")
    assert mountinfo.resolve("/data", mountinfo.parse(text)).source == "b:/y"


def test_a_mount_under_an_overmounted_directory_is_hidden():
    table = entries("overmounted")
    holder = mountinfo.resolve("/srv/instances", table)
    assert (holder.fstype, holder.mount_point) == ("ext4", "/srv")


def test_bind_mount_root_gives_the_location_inside_the_filesystem():
    table = entries("gpfs_bind")
    holder = mountinfo.resolve("/var/lib/nova/instances", table)
    assert (holder.source, holder.root) == ("gpfs1", "/pool/instances")
    assert mountinfo.location(holder, "/var/lib/nova/instances/abc") == \
        "/pool/instances/abc"
    direct = mountinfo.resolve("/gpfs1/pool/instances", table)
    assert mountinfo.location(direct, "/gpfs1/pool/instances") == "/pool/instances"


def test_fstab_lines_comments_swap_and_escapes():
    table = mountinfo.parse_fstab((FIXTURES / "gpfs.fstab").read_text())
    assert [(e.mount_point, e.fstype) for e in table] == [
        ("/", "ext4"), ("/var/lib/nova", "xfs"), ("/gpfs1", "gpfs"),
        ("/gpfs10", "gpfs")]
    assert table[2].line == 4
    assert mountinfo.parse_fstab(r"srv:/a\040b /mnt/a\040b nfs4 rw 0 0")[0] \
        .mount_point == "/mnt/a b"
    with pytest.raises(MountinfoError, match="host cn3.*line 1"):
        mountinfo.parse_fstab("/dev/sda1 /\n", host="cn3")
