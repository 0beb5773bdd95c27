"""SIGTERM (``kill PID``, systemd's stop) is taken as Ctrl-C: a command
that started a real placement stops it on the way out, exit 130, one
line, no traceback. Before, the command died at once and left placement's
gunicorn processes running."""

import os
import pathlib
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_during_bench_stops_the_placement_it_started(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "scheduler_ext.cmd.entry", "bench",
            "--sizes", "10000", "--repeat", "1", "--placement",
            "--placement-repeat", "100000"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    # into the run: placement started (a gunicorn child in the group)
    while time.monotonic() < deadline and proc.poll() is None:
        children = subprocess.run(["pgrep", "-g", str(proc.pid), "-f", "gunicorn"],
                                  capture_output=True, text=True).stdout.split()
        if children:
            break
        time.sleep(1)
    assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
    assert children, "placement never started"
    time.sleep(3)
    os.kill(proc.pid, signal.SIGTERM)      # the command alone, as kill does
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()[-2000:]
    assert "Traceback" not in err.decode()
    deadline = time.monotonic() + 30
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _group_alive(proc.pid), subprocess.run(
        ["ps", "-o", "pid,cmd", "-g", str(proc.pid)], capture_output=True,
        text=True).stdout
