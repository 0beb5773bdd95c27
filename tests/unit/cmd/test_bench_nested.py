"""``scheduler-ext bench --nested``: its input check and a small run."""

import json

import pytest

from scheduler_ext.cmd import main as cli


@pytest.mark.parametrize("value", ["abc", "5", "", "100,x"])
def test_nested_sizes_are_checked_before_work(capsys, value):
    try:
        code = cli.main(["bench", "--nested", value])
    except SystemExit as exc:       # argparse's own exit
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--nested" in err[0]


def test_a_small_nested_run(capsys, tmp_path):
    out = tmp_path / "bench.json"
    assert cli.main(["bench", "--nested", "50", "--repeat", "1",
                     "--baseline-requests", "1", "--json", str(out),
                     "-f", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["compute nodes"] == 50 and row["providers"] == 201  # + a disk pool
    assert row["same roots"] is True
    data = json.loads(out.read_text())
    run = data["nested"][0]
    assert run["engine"]["port"]["select"]["n"] == 5
    assert run["baseline"]["same_roots"] is True
