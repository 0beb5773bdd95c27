"""The README's first command, exactly as written, in a fresh copy of the
source tree and a fresh virtual environment (pip's cache serves the
packages): it prints the stock-vs-ours table; ``--json`` writes every
figure; tqdm (the progress bars' extra) is not installed; ``--plot``
without matplotlib exits 2 with one line saying how to
get it, and with the ``plot`` extra installed draws a PNG holding the
expected series. Takes a minute or two (the installs)."""

import json
import os
import pathlib
import shutil
import subprocess

from tests.unit.cmd.test_cli import png_text

ROOT = pathlib.Path(__file__).resolve().parents[3]
FIRST = ("python3 -m venv .venv && .venv/bin/pip install -e . && "
         ".venv/bin/scheduler-ext simulate")


def _first_command() -> str:
    lines = [line.strip() for line in (ROOT / "README.rst").read_text().splitlines()]
    return next(line for line in lines if line.startswith("python3 -m venv"))


def _sh(cwd, command, timeout=900):
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_readme_first_command_in_a_fresh_venv(tmp_path):
    assert _first_command() == FIRST
    tree = tmp_path / "scheduler-ext"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "*.egg-info", ".mypy_cache",
        ".pytest_cache", ".import_linter_cache", "build"))
    done = _sh(tree, FIRST)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "scenario bug-1790204" in done.stderr and "scenario random" in done.stderr
    table = [[cell.strip() for cell in line.strip().strip("|").split("|")]
             for line in done.stdout.splitlines() if line.startswith("| ")]
    assert table[0] == ["scenario", "measure", "stock", "ours"]
    assert ["bug-1790204", "resize", "0/1", "1/1"] in table   # the bug, then fixed
    assert ["bug-1790204", "invariant violations", "0", "0"] in table
    assert ["random", "invariant violations", "0", "0"] in table

    # the progress bars' tqdm is an extra: a plain install has none
    done = _sh(tree, ".venv/bin/python -c 'import tqdm'")
    assert done.returncode == 1 and "No module named 'tqdm'" in done.stderr, done.stderr

    done = _sh(tree, ".venv/bin/scheduler-ext simulate --json run.json")
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((tree / "run.json").read_text())
    assert doc["scenarios"]["random"]["same_host"]["invariant_violations"] == 0
    assert doc["scenarios"]["bug-1790204"]["stock"]["operations"]["resize"] == \
        {"succeeded": 0, "attempted": 1}

    done = _sh(tree, ".venv/bin/scheduler-ext simulate --plot run.png")
    assert done.returncode == 2 and not (tree / "run.png").exists()
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("scheduler-ext simulate: error: --plot needs matplotlib, "
                           f"which is not installed: {tree}/.venv/bin/python")
    assert line.endswith(" -m pip install 'scheduler-ext[plot]'")  # into this venv

    done = _sh(tree, ".venv/bin/pip install -e '.[plot]' && "
                     ".venv/bin/scheduler-ext simulate --plot run.png")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    series = json.loads(png_text(tree / "run.png")["Series"])
    assert "resize success, cumulative: stock" in series
    assert "resize success, cumulative: ours" in series
    assert "reconcile window: ours" in series
    assert "fleet utilisation: ours MEMORY_MB" in series
