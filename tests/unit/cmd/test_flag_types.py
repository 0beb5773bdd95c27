"""The argparse types every command and benchmark shares
(``cmd.common``): a number and a directory to write into."""

import argparse
import os

import pytest

from scheduler_ext.cmd import common


@pytest.mark.parametrize("text, minimum, expected", [
    ("2.5", 0.0, 2.5), ("0", 0.0, 0.0), ("1e3", 1.0, 1000.0)])
def test_number_accepts(text, minimum, expected):
    assert common.number(minimum)(text) == expected


@pytest.mark.parametrize("text, reason", [
    ("x", "must be a number, got 'x'"), ("-1", "at least 0.0, got -1"),
    ("nan", "got nan"), ("inf", "got inf")])
def test_number_refuses(text, reason):
    with pytest.raises(argparse.ArgumentTypeError, match=reason):
        common.number(0.0)(text)


def test_writable_dir_existing_or_to_be_made(tmp_path):
    assert common.writable_dir(str(tmp_path)) == str(tmp_path)
    new = tmp_path / "results"
    assert common.writable_dir(str(new)) == str(new)
    assert not new.exists()     # checked, not made


def test_writable_dir_refuses(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(argparse.ArgumentTypeError, match="not a directory"):
        common.writable_dir(str(a_file))
    with pytest.raises(argparse.ArgumentTypeError, match="does not exist"):
        common.writable_dir(str(a_file / "below"))
    if os.geteuid() != 0:       # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(argparse.ArgumentTypeError, match="not writable"):
            common.writable_dir(str(locked / "new"))
