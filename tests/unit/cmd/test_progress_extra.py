"""simulate's progress bars come with the ``progress`` extra (tqdm), not
with the package: without tqdm the default draws none and the run goes
on, and ``--progress`` asked for is a usage error naming the extra."""

import sys

from scheduler_ext.cmd import main as cli

SMALL_RUN = ["simulate", "--scenario", "random", "--hosts", "4", "--sharing", "1",
             "--steps", "30", "--jobs", "1"]


def test_progress_asked_without_tqdm_exits_2_naming_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)      # import tqdm fails
    assert cli.main(SMALL_RUN + ["--progress"]) == 2
    out, err = capsys.readouterr()
    [line] = err.strip().splitlines()
    assert "--progress needs tqdm, which is not installed" in line, line
    assert line.endswith(" -m pip install 'scheduler-ext[progress]'"), line
    assert out == ""


def test_default_on_a_terminal_without_tqdm_runs_without_bars(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert cli.main(SMALL_RUN) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    assert "| random" in out


def test_default_on_a_terminal_with_tqdm_draws_a_bar_per_strategy(monkeypatch, capsys):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert cli.main(SMALL_RUN) == 0
    out, err = capsys.readouterr()
    assert err.count("30/30") >= 2, err     # stock and ours, each to the end
