"""The end-to-end, refresh and vector benchmarks check every flag before any
service starts: exit 2, the last line on stderr names the flag and what
was wrong, nothing on stdout, no traceback, nothing made."""

import os
import subprocess
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")


def _refused(script, argv, flag, reason, tmp_path):
    out = tmp_path / "never-made"
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, script), *argv]
        + ([] if "--out" in argv or script != "nova_e2e.py" else ["--out", str(out)]),
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    # nova's imports may print a library's deprecation warning first
    last = proc.stderr.strip().splitlines()[-1]
    assert flag in last and reason in last, proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("argv, flag, reason", [
    (["--sizes", "x"], "--sizes", "must be an integer, got 'x'"),
    (["--sizes", "1000,0"], "--sizes", "must be at least 100, got 0"),
    (["--decisions", "-1"], "--decisions", "must be at least 1"),
    (["--workers", "0"], "--workers", "must be at least 1"),
    (["--rate", "nan"], "--rate", "finite number"),
    (["--throughput-seconds", "0"], "--throughput-seconds", "at least 1.0"),
    (["--host-limit", "-5"], "--host-limit", "at least 0"),
    (["--host-state-refresh-interval", "-1"], "--host-state-refresh-interval",
     "at least 0.0"),
    (["--compare", "many"], "--compare", "must be an integer"),
    (["--wsgi-workers", "0"], "--wsgi-workers", "at least 1"),
    (["--schedulers", "stock"], "--schedulers", "must name ours"),
    (["--nova-database", "mysql"], "--nova-database", "invalid choice"),
    (["--out", "/etc/hostname/results"], "--out", "does not exist"),
])
def test_end_to_end_benchmark_refuses_a_bad_flag(argv, flag, reason, tmp_path):
    _refused("nova_e2e.py", argv, flag, reason, tmp_path)


@pytest.mark.parametrize("argv, flag, reason", [
    (["--sizes", "50"], "--sizes", "must be at least 100"),
    (["--changed", "0"], "--changed", "must be at least 1"),
    (["--rounds", "x"], "--rounds", "must be an integer"),
    (["--changed", "500", "--sizes", "200"], "--changed", "500 providers in a fleet of 200"),
    (["--database", "mysql"], "--database", "invalid choice"),
])
def test_refresh_benchmark_refuses_a_bad_flag(argv, flag, reason, tmp_path):
    _refused("fleet_view_refresh.py", argv, flag, reason, tmp_path)


@pytest.mark.parametrize("argv, flag, reason", [
    (["--rounds", "0"], "--rounds", "must be at least 1"),
    (["--providers", "5"], "--providers", "must be at least 20"),
    (["--writes", "many"], "--writes", "must be an integer"),
])
def test_mariadb_check_refuses_a_bad_flag(argv, flag, reason, tmp_path):
    _refused("sql_source_mariadb.py", argv, flag, reason, tmp_path)


@pytest.mark.parametrize("script, argv, flag, reason", [
    ("vector_filtering.py", ["--hosts", "-5"], "--hosts", "at least 1"),
    ("vector_filtering.py", ["--rounds", "0"], "--rounds", "at least 1"),
    ("vector_filtering.py", ["--extra-specs", "99"], "--extra-specs", "at most"),
    ("vector_filtering.py", ["--filters", "NoSuchFilter"], "--filters", "NoSuchFilter"),
    ("vector_weighing.py", ["--hosts", "-5"], "--hosts", "at least 1"),
    ("vector_weighing.py", ["--rounds", "0"], "--rounds", "at least 1"),
])
def test_vector_benchmarks_refuse_a_bad_flag(script, argv, flag, reason, tmp_path):
    _refused(script, argv, flag, reason, tmp_path)
