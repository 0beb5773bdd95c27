"""Every ``scheduler-ext`` command line of the README, the benchmarks
README and the docs (``doc/source``) parses as written (each flag exists
and takes its value), and the ones that need no service run as written.
A command that needs nova, placement or PostgreSQL is only parsed here; its
run is in the functional tests or the benchmarks."""

import pathlib
import shlex

import pytest

from scheduler_ext.cmd import main as cli

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOCS = ("README.rst", "benchmarks/README.rst",
        *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "doc/source").rglob("*.rst")))
#: run as written (small and service-free), with their expected exit code
RUN = {"scheduler-ext simulate --scenario bug-1790204": 0,
       "scheduler-ext simulate --scenario random --hosts 40 --sharing 4 "
       "--steps 2000 --seed 7": 0,
       "scheduler-ext storage discover --path /tmp --read-only": 0}


def commands():
    """(document, command) for each scheduler-ext line of a literal block,
    continuation lines joined, the .venv/bin/ prefix and comments dropped."""
    found = []
    for doc in DOCS:
        lines = (ROOT / doc).read_text().splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
            text = line.strip().split("  #")[0].strip()
            if line.startswith("    ") and text.startswith(
                    (".venv/bin/scheduler-ext ", "scheduler-ext ")):
                found.append((doc, text.replace(".venv/bin/", "", 1)))
    return found


def test_the_documents_hold_commands():
    names = {shlex.split(c)[1] for _, c in commands()}
    assert names >= {"simulate", "bench", "audit", "storage", "evacuate"}
    assert "doc/source/operating.rst" in {doc for doc, _ in commands()}
    assert set(RUN) <= {c for _, c in commands()}


@pytest.mark.parametrize("doc, command", commands(), ids=[c for _, c in commands()])
def test_a_documented_command_parses(doc, command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)     # where the README's relative files are
    (tmp_path / "instances.json").write_text("[]")
    argv = shlex.split(command)[1:]
    name, args = cli.parse_args(argv)       # argparse exits 2 on a bad flag
    assert name in cli.COMMANDS and args is not None


@pytest.mark.parametrize("command, code", RUN.items())
def test_a_service_free_documented_command_runs(command, code, capsys):
    assert cli.main(shlex.split(command)[1:]) == code
    out, err = capsys.readouterr()
    assert out and "Traceback" not in err
