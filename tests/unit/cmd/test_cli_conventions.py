"""The conventions cliff and ``cmd.base`` give every sub-command: output
formats, -v anywhere, --version, --debug, help, findings on stderr with
exit 1, Ctrl-C (exit 130, no partial file; bench keeps what it finished,
marked partial), a closed stdout (exit 141, silent)."""

import csv
import io
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
import yaml

from scheduler_ext.cmd import bench, main as cli, simulate

ROOT = pathlib.Path(__file__).resolve().parents[3]
BUG = ["simulate", "--scenario", "bug-1790204"]


def run(capsys, argv):
    try:
        code = cli.main(argv)
    except SystemExit as exc:       # argparse's own exit (--version)
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err or "--debug" in argv, err
    return code, out, err


@pytest.mark.parametrize("fmt, parse", [
    ("json", json.loads),
    ("yaml", yaml.safe_load),
    ("csv", lambda text: list(csv.DictReader(io.StringIO(text)))),
])
def test_simulate_rows_in_every_machine_format(capsys, fmt, parse):
    code, out, _ = run(capsys, BUG + ["-f", fmt])
    rows = {(r["scenario"], r["measure"]): (r["stock"], r["ours"]) for r in parse(out)}
    assert code == 0
    assert rows["bug-1790204", "resize"] == ("0/1", "1/1")


def test_columns_and_value_format(capsys):
    code, out, _ = run(capsys, BUG + ["-f", "value", "-c", "measure", "-c", "ours"])
    assert code == 0 and "resize 1/1" in out.splitlines()


def test_verbose_after_the_sub_command(capsys):
    code, out, err = run(capsys, BUG + ["-v", "-f", "value"])
    assert code == 0 and "INFO scheduler_ext" in err


def test_version(capsys):
    from scheduler_ext import __version__
    code, out, _ = run(capsys, ["--version"])
    assert code == 0 and out.strip() == f"scheduler-ext {__version__}"


def test_debug_shows_the_traceback_and_keeps_the_exit_code(capsys):
    code, _, err = run(capsys, ["--debug", "audit"])
    assert code == 2 and "Traceback" in err and "nothing says where placement is" in err


def test_help_of_a_two_word_sub_command(capsys):
    code, out, _ = run(capsys, ["help", "storage", "sync"])
    assert code == 0 and "--os-cloud" in out and "--apply" in out


def test_a_lost_mount_is_a_finding_said_on_stderr(capsys, tmp_path):
    code, out, err = run(capsys, ["storage", "discover", "--path", str(tmp_path),
                                  "--host", "cn1", "--read-only", "--expect-shared"])
    assert code == 1 and json.loads(out)["state"] == "lost-mount"
    [line] = err.strip().splitlines()
    assert f"host cn1, path {tmp_path}: lost-mount" in line


def test_discover_output_file_is_the_report(capsys, tmp_path):
    target = tmp_path / "cn1.json"
    code, out, _ = run(capsys, ["storage", "discover", "--path", str(tmp_path),
                                "--host", "cn1", "--read-only", "--output", str(target)])
    assert code == 0 and json.loads(target.read_text()) == json.loads(out)


def test_interrupted_simulate_writes_nothing(capsys, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(simulate, "run_strategies", interrupted)
    code, out, err = run(capsys, ["simulate", "--json", str(tmp_path / "run.json"),
                                  "--plot", str(tmp_path / "run.png")])
    assert code == 130 and out == ""
    assert err.strip().splitlines()[-1] == \
        "scheduler-ext simulate: error: interrupted (no file was left half-written)"
    assert list(tmp_path.iterdir()) == []


def test_interrupted_bench_keeps_the_sizes_it_finished(capsys, tmp_path, monkeypatch):
    measured = []
    real = bench.bench_size

    def second_interrupted(n, args):
        if measured:
            raise KeyboardInterrupt
        measured.append(n)
        return real(n, args)
    monkeypatch.setattr(bench, "bench_size", second_interrupted)
    target = tmp_path / "bench.json"
    code, out, err = run(capsys, ["bench", "--sizes", "100,200", "--repeat", "1",
                                  "--baseline-requests", "1", "--json", str(target),
                                  "-f", "json"])
    assert code == 130
    assert [r["providers"] for r in json.loads(out)] == [100]
    doc = json.loads(target.read_text())
    assert doc["partial"] is True and [r["providers"] for r in doc["results"]] == [100]
    assert 'interrupted after 1 size(s)' in err and '"partial": true' in err
    assert [p.name for p in tmp_path.iterdir()] == ["bench.json"]


def _command(*argv):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return [sys.executable, "-m", "scheduler_ext.cmd.entry", *argv], env


def test_a_closed_stdout_is_silent(tmp_path):
    argv, env = _command(*BUG)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdout.close()             # the reader left, as "| head" does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_ctrl_c_on_the_process_group(tmp_path):
    """Ctrl-C reaches the command and its worker processes: exit 130, one
    line, no traceback from any of them, no file."""
    argv, env = _command("simulate", "--scenario", "random", "--hosts", "200",
                         "--steps", "1000000", "--jobs", "2", "--json",
                         str(tmp_path / "run.json"))
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path,
                            start_new_session=True)
    time.sleep(8)                   # into the run (not a timed assertion)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "Traceback" not in err.decode() and out == b""
    assert err.decode().strip().splitlines()[-1].endswith(
        "interrupted (no file was left half-written)")
    assert list(tmp_path.iterdir()) == []
