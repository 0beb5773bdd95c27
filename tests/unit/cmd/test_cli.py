"""The scheduler-ext command."""

import pytest

from scheduler_ext.cmd import main as cli


def test_simulate_default_run_shows_the_bug_fixed(capsys):
    assert cli.main(["simulate", "--steps", "60", "--hosts", "6"]) == 0
    out = capsys.readouterr().out
    bug, random_part = out.split("scenario random")
    stock_line = next(line for line in bug.splitlines() if "stock:" in line)
    ours_line = next(line for line in bug.splitlines() if "same_host:" in line)
    assert "resize 0/1" in stock_line and "no host fits" in bug
    assert "resize 1/1" in ours_line and "resize same host 1/1" in ours_line
    assert out.count("invariant violations: 0") == 4


def test_unknown_subcommand_exits_with_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["nonesuch"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
