"""LocalPlacement's gunicorn and placement.conf options are checked before
anything starts, against placement's own option definitions; the race
reproduction script rejects bad flags with one line and exit 2."""

import os
import subprocess
import sys

import pytest

from scheduler_ext import errors
from scheduler_ext.lab.placement_server import (
    LocalPlacement, validate_placement_conf)

RACE = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks",
                    "placement_race.py")


@pytest.mark.parametrize("kwargs, option", [
    ({"worker_class": "eventlet"}, "worker_class"),
    ({"worker_class": "sync", "threads": 4}, "threads"),
    ({"worker_class": "gthread", "threads": 0}, "threads"),
    ({"workers": 0}, "workers"),
    ({"workers": "4"}, "workers"),
    ({"placement_conf": {"placement": {"allocation_conflict_retry_count": 0}}},
     "[placement] allocation_conflict_retry_count"),
    ({"placement_conf": {"placement": {"allocation_conflict_retry_count": "x"}}},
     "[placement] allocation_conflict_retry_count"),
    ({"placement_conf": {"placement": {"no_such_option": 1}}},
     "[placement] no_such_option"),
    ({"placement_conf": {"no_such_section": {"a": 1}}}, "placement_conf"),
    ({"placement_conf": {"api": {"auth_strategy": "keystone"}}},
     "[api] auth_strategy"),
    ({"placement_conf": {"placement": {
        "allocation_candidates_generation_strategy": "random"}}},
     "[placement] allocation_candidates_generation_strategy"),
    ({"placement_conf": {"placement": {"randomize_allocation_candidates":
                                       "yes\nsync_on_startup = true"}}},
     "[placement] randomize_allocation_candidates"),
])
def test_bad_local_placement_option_is_refused_before_start(kwargs, option):
    with pytest.raises(errors.ConfigError) as exc:
        LocalPlacement(**kwargs)
    assert exc.value.option == option


def test_placement_conf_values_are_rendered_as_placement_reads_them():
    assert validate_placement_conf({
        "placement": {"allocation_conflict_retry_count": 1},
        "workarounds": {"optimize_for_wide_provider_trees": True}}) == {
        "placement": {"allocation_conflict_retry_count": "1"},
        "workarounds": {"optimize_for_wide_provider_trees": "true"}}


@pytest.mark.parametrize("argv, flag", [
    (["--workers", "0"], "--workers"),
    (["--threads", "4"], "--threads"),             # sync takes 1 thread
    (["--retry-count", "10,0"], "--retry-count"),
    (["--client-resends", "-1"], "--client-resends"),
    (["--database", "sqlite"], "--database"),
    (["--rounds", "x"], "--rounds"),
    (["--url", "ftp://host"], "--url"),
])
def test_race_script_bad_flag_is_one_line_and_exit_2(argv, flag):
    proc = subprocess.run([sys.executable, RACE, *argv], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], proc.stderr
