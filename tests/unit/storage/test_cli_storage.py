"""``scheduler-ext storage``: discover on this machine, and every input
checked before work starts (exit 2, one line naming what was wrong)."""

import dataclasses
import json
import pathlib
import shlex
import uuid

import pytest

from scheduler_ext.cmd import main as cli
from tests.unit.storage.hosts import FIXTURES
from tests.unit.storage.reports import three_hosts

OPERATING = pathlib.Path(__file__).resolve().parents[3] / "doc/source/operating.rst"


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_discover_reports_a_local_directory(tmp_path, capsys):
    code, out, err = run(["storage", "discover", "--path", str(tmp_path),
                          "--host", "cn1"], capsys)
    report = json.loads(out)
    assert code == 0 and err == ""
    assert (report["host"], report["path"], report["state"]) == \
        ("cn1", str(tmp_path), "local")
    assert report["total_bytes"] > 0 and report["fs_class"] == "local"
    assert list(tmp_path.iterdir()) == []        # nothing written on local storage


def test_discover_with_a_broken_mountinfo_exits_2_naming_host_and_line(tmp_path, capsys):
    code, out, err = run(["storage", "discover", "--path", str(tmp_path),
                          "--host", "cn1", "--mountinfo",
                          str(FIXTURES / "broken.mountinfo")], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "line 2" in err
    assert f"host cn1, path {tmp_path}" in err


@pytest.mark.parametrize("argv, needle", [
    (["--path", "relative/dir"], "--path must be absolute"),
    (["--path", "/nonexistent/instances"], "path /nonexistent/instances"),
    (["--path", "/tmp", "--host", "bad host"], "not a valid host name"),
    (["--path", "/tmp", "--config-file", "/nonexistent.conf"],
     "--config-file /nonexistent.conf: no such file"),
    (["--path", "/tmp", "--mountinfo", "/nonexistent/mountinfo"],
     "path /nonexistent/mountinfo"),
])
def test_discover_bad_input_exits_2_with_one_line(argv, needle, capsys):
    code, out, err = run(["storage", "discover", "--host", "cn1"] + argv, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert needle in err


def test_sync_rejects_a_bad_report_before_contacting_placement(tmp_path, capsys):
    good = tmp_path / "cn1.json"
    good.write_text(three_hosts()[0].to_json())
    bad = tmp_path / "cn2.json"
    bad.write_text(json.dumps({"version": 1, "host": "cn2", "path": "/x",
                               "state": "shared", "total_bytes": "big"}))
    # port 9 (discard) answers nothing: reaching it would be a different error
    code, out, err = run(["storage", "sync", str(good), str(bad),
                          "--placement-url", "http://127.0.0.1:9"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{bad}: field 'total_bytes' must be int or null" in err


@pytest.mark.parametrize("content, needle", [
    ("{not json", "not JSON"),
    ("[]", "a report is a JSON object"),
    ('{"version": 2}', "version 2 is not 1"),
    ('{"version": 1, "host": "h", "path": "/p", "state": "maybe"}',
     "state 'maybe' is not one of"),
])
def test_sync_report_format_errors(tmp_path, content, needle, capsys):
    report = tmp_path / "r.json"
    report.write_text(content)
    code, _, err = run(["storage", "sync", str(report), "--placement-url",
                        "http://127.0.0.1:9"], capsys)
    assert code == 2 and needle in err and str(report) in err


def test_sync_contradictory_reports_exit_2_naming_hosts(tmp_path, capsys):
    a, b = three_hosts()[:2]
    files = []
    for r in (a, dataclasses.replace(b, token=str(uuid.UUID(int=3)))):
        f = tmp_path / f"{r.host}.json"
        f.write_text(r.to_json())
        files.append(str(f))
    code, _, err = run(["storage", "sync", *files, "--placement-url",
                        "http://127.0.0.1:9"], capsys)
    assert code == 2 and "host cn1" in err and "host cn2" in err


def test_storage_needs_a_subcommand(capsys):
    assert cli.main(["storage"]) == 2
    assert ("storage discover, storage live-migration, storage migrate-disk, "
            "storage sync") in capsys.readouterr().err


def documented_commands():
    """The storage section's command lines (doc/source/operating.rst)."""
    text = OPERATING.read_text()
    section = text[text.index("Shared storage from the real topology\n==="):
                   text.index("Deploying placement for several schedulers\n===")]
    return [line.strip() for line in section.splitlines()
            if line.startswith(("    scheduler-ext ",
                                "    .venv/bin/scheduler-ext "))]


def test_documented_storage_commands_parse_and_the_local_one_runs(capsys):
    commands = documented_commands()
    assert len(commands) == 10
    for command in commands:
        argv = shlex.split(command.split(" > ")[0])[1:]
        name, _ = cli.parse_args(argv)
        assert name.startswith(("storage ", "evacuate "))
    local = [c for c in commands if "--path /tmp --read-only" in c]
    code, out, _ = run(shlex.split(local[0])[1:], capsys)
    assert code == 0 and json.loads(out)["path"] == "/tmp"
