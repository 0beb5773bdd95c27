"""Every bad input a new user tried: exit 2, one line on stderr naming the
flag or file and what was wrong, no traceback, nothing written (the audit
cases point at an address where nothing listens, so any request would
show as "placement unreachable" instead of the expected line)."""

import pytest

from scheduler_ext.cmd import main as cli

DOWN = "http://127.0.0.1:9"


def run(capsys, argv):
    try:
        code = cli.main(argv)
    except SystemExit as exc:       # argparse's own exit
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_usage_error(capsys, argv, *expected):
    code, out, err = run(capsys, argv)
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for text in expected:
        assert text in lines[0], lines[0]
    assert "Traceback" not in err and "placement.undefined_code" not in err
    assert "unreachable" not in err
    return lines[0]


@pytest.mark.parametrize("argv, expected", [
    (["--sharing", "-1"], ("--sharing", "must be at least 0, got -1")),
    (["--hosts", "-3"], ("--hosts", "must be at least 1, got -3")),
    (["--hosts", "0"], ("--hosts", "must be at least 1, got 0")),
    (["--steps", "ten"], ("--steps", "must be an integer, got 'ten'")),
    (["--full-check-every", "-1"], ("--full-check-every", "at least 0")),
    (["--jobs", "0"], ("--jobs", "at least 1")),
    (["--json", "/missing/dir/x.json"], ("--json", "/missing/dir does not exist")),
    (["--plot", "/missing/dir/x.png"], ("--plot", "/missing/dir does not exist")),
    (["--scenario", "/missing/file.yaml"], ("--scenario /missing/file.yaml",
                                            "no such file")),
    (["--format", "xml"], ("--format", "invalid choice")),
])
def test_simulate_bad_flags(capsys, argv, expected):
    assert_usage_error(capsys, ["simulate"] + argv, *expected)


@pytest.mark.parametrize("text, expected", [
    ("flavors: [1\n", ("line 2", "not valid YAML/JSON")),
    ("flavors: {}\nhosts: []\nevents: []\n", ("line 1", "flavors")),
    ("flavors: {s: {VCPU: 1}}\nhosts:\n  - name: a\n    inventory:\n"
     "      VCPU: {total: -4}\nevents: []\n", ("line 5", "hosts/0/inventory/VCPU/total")),
    ("flavors: {s: {VCPU: 1}}\nhosts:\n  - name: a\n    inventory: {VCPU: {total: 4}}\n"
     "events:\n  - {op: boot, server: x, flavor: s}\n  - {op: resize, server: y, flavor: s}\n",
     ("line 7", "server 'y' is not declared")),
    ("flavors: {s: {VCPU: 1}}\nhosts:\n  - name: a\n    inventory: {VCPU: {total: 4}}\n"
     "events:\n  - {op: boot, server: x, flavor: nope}\n", ("line 6", "no flavor named 'nope'")),
    ("flavors: {s: {NOT_A_CLASS: 1}}\nhosts:\n  - name: a\n    inventory: {VCPU: {total: 4}}\n"
     "events: []\n", ("line 1", "NOT_A_CLASS")),
    ("flavors: {s: {VCPU: 1}}\nhosts:\n  - name: a\n    inventory: {VCPU: {total: 4}}\n"
     "events:\n  - {op: fly, server: x}\n", ("line 6", "events/0/op")),
])
def test_simulate_bad_scenario_file_names_the_line(capsys, tmp_path, text, expected):
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    assert_usage_error(capsys, ["simulate", "--scenario", str(path)],
                       f"--scenario {path}", *expected)


def test_simulate_scenario_not_utf8(capsys, tmp_path):
    path = tmp_path / "scenario.yaml"
    path.write_bytes(b"flavors: \xff\xfe\n")
    assert_usage_error(capsys, ["simulate", "--scenario", str(path)],
                       str(path), "not UTF-8")


@pytest.mark.parametrize("argv, expected", [
    (["--repeat", "0"], ("--repeat", "must be at least 1, got 0")),
    (["--k", "-2"], ("--k", "must be at least 1, got -2")),
    (["--sizes", "5"], ("--sizes", "must be at least 10, got 5")),
    (["--sizes", "1000,x"], ("--sizes", "must be an integer, got 'x'")),
    (["--sizes", ","], ("--sizes", "needs at least one value")),
    (["--json", "/missing/dir/x.json"], ("--json", "/missing/dir does not exist")),
    (["--scale-out", "0"], ("--scale-out", "at least 1")),
])
def test_bench_bad_flags_before_any_work(capsys, argv, expected):
    assert_usage_error(capsys, ["bench", "--sizes", "1000"] + argv
                       if "--sizes" not in argv else ["bench"] + argv, *expected)


def conf(tmp_path, text, raw=None):
    path = tmp_path / "nova.conf"
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text(text)
    return str(path)


@pytest.mark.parametrize("case, text, expected", [
    ("empty [placement]", "[placement]\n", "sets neither auth_type nor endpoint_override"),
    ("password, no options", "[placement]\nauth_type = password\n",
     "auth_type = password needs auth_url"),
    ("noauth", "[placement]\nauth_type = noauth\n",
     "auth_type = noauth needs"),
    ("unknown plugin", "[placement]\nauth_type = nonesuch\n",
     "auth_type = nonesuch: no such keystoneauth plugin"),
    ("not INI", "[placement\nauth_type = x\n", "not an INI file"),
])
def test_audit_bad_config_file(capsys, tmp_path, case, text, expected):
    path = conf(tmp_path, text)
    assert_usage_error(capsys, ["audit", "--config-file", path, "--no-nova"],
                       path, expected)


def test_audit_config_file_missing(capsys):
    assert_usage_error(capsys, ["audit", "--config-file", "/missing/nova.conf"],
                       "--config-file", "/missing/nova.conf: no such file")


def test_audit_config_file_not_utf8(capsys, tmp_path):
    path = conf(tmp_path, None, raw=b"[placement]\nauth_type = \xff\n")
    assert_usage_error(capsys, ["audit", "--config-file", path, "--no-nova"],
                       path, "not UTF-8")


@pytest.mark.parametrize("url", ["not-a-url", "ftp://x", "http://host:port/"])
def test_audit_placement_url_not_a_url(capsys, url):
    assert_usage_error(capsys, ["audit", "--placement-url", url],
                       f"--placement-url {url}")


@pytest.mark.parametrize("content, expected", [
    ('{"a": 1}', "must be a JSON list of instances, got dict"),
    ('["x"]', "entry 0: must be an object"),
    ("5", "must be a JSON list of instances, got int"),
    ("[", "not JSON"),
    ('[{"uuid": "x"}]', "entry 0: missing 'host'"),
])
def test_audit_bad_instances_file_before_contacting_placement(capsys, tmp_path,
                                                              content, expected):
    path = tmp_path / "instances.json"
    path.write_text(content)
    assert_usage_error(capsys, ["audit", "--placement-url", DOWN, "--instances",
                                str(path), "--apply"], f"--instances {path}", expected)


def test_audit_export_target_checked_first(capsys):
    assert_usage_error(capsys, ["audit", "--placement-url", DOWN, "--export",
                                "/missing/dir/x.json"], "--export", "does not exist")


def test_our_own_checks_do_not_print_as_placement(capsys):
    """An InvalidInput (our check) prints as ours; placement's answers keep
    their status and code."""
    from scheduler_ext import errors
    from scheduler_ext.placement import validation
    with pytest.raises(errors.InvalidInput) as info:
        validation.uuid("nope", "consumer_uuid")
    assert "placement.undefined_code" not in str(info.value)
    assert str(info.value).startswith("invalid input (refused before reaching placement)")
    assert str(errors.InvalidRequest("x")) == "400 placement.undefined_code: x"
