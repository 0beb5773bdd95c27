"""The scheduler-ext command: the simulate table, --format json, --json,
--plot and scenario files."""

import json
import struct
import zlib

from scheduler_ext.cmd import main as cli


def png_text(path):
    """The PNG's tEXt entries; asserts the signature and chunk CRCs."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, text, kinds = 8, {}, []
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + size]
        (crc,) = struct.unpack(">I", data[pos + 8 + size:pos + 12 + size])
        assert crc == zlib.crc32(kind + body)
        kinds.append(kind)
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            text[key.decode()] = value.decode("latin-1")
        pos += 12 + size
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND"
    return text


def test_simulate_default_run_shows_the_bug_fixed(capsys):
    assert cli.main(["simulate", "--steps", "60", "--hosts", "6", "-f", "json"]) == 0
    out, err = capsys.readouterr()
    rows = {(r["scenario"], r["measure"]): (r["stock"], r["ours"])
            for r in json.loads(out)}
    assert rows["bug-1790204", "resize"] == ("0/1", "1/1")
    assert "no host fits" in err.split("scenario random")[0]
    assert rows["bug-1790204", "invariant violations"] == ("0", "0")
    assert rows["random", "invariant violations"] == ("0", "0")
    assert rows["random", "invariant checks (touched/full)"][1] == "60/2"


def test_simulate_json_and_plot(tmp_path, capsys):
    js, png = tmp_path / "run.json", tmp_path / "run.png"
    assert cli.main(["simulate", "--scenario", "random", "--steps", "80",
                     "--hosts", "6", "--json", str(js), "--plot", str(png)]) == 0
    written = json.loads(js.read_text())
    for doc in (written,):
        random = doc["scenarios"]["random"]
        assert set(random) == {"stock", "same_host"}
        ours = random["same_host"]
        assert ours["invariant_violations"] == 0
        assert ours["timeline"][-1]["step"] == 80
        assert ours["operations"]["resize"]["attempted"] >= \
            ours["operations"]["resize"]["succeeded"] > 0
    series = json.loads(png_text(png)["Series"])
    for label in ("stock", "ours"):
        assert f"resize success, cumulative: {label}" in series
        assert f"same-host resizes, cumulative: {label}" in series
        assert f"fleet utilisation: {label} VCPU" in series
        assert f"reconcile window: {label}" in series


def test_simulate_runs_are_the_same_in_processes_and_in_one(tmp_path, capsys):
    args = ["simulate", "--scenario", "random", "--steps", "50", "--hosts", "5",
            "--json"]
    assert cli.main(args + [str(tmp_path / "two.json"), "--jobs", "2"]) == 0
    two = json.loads((tmp_path / "two.json").read_text())["scenarios"]["random"]
    assert cli.main(args + [str(tmp_path / "one.json"), "--jobs", "1"]) == 0
    one = json.loads((tmp_path / "one.json").read_text())["scenarios"]["random"]
    for strategy in one:
        assert one[strategy]["counts"] == two[strategy]["counts"]


SCENARIO = """\
flavors:
  small: {VCPU: 1, MEMORY_MB: 2048, DISK_GB: 1028}
  big: {VCPU: 2, MEMORY_MB: 2048, DISK_GB: 1028}
hosts:
  - name: cn
    inventory:
      VCPU: {total: 2}
      MEMORY_MB: {total: 8192}
      DISK_GB: {total: 1028}
servers:
  - {name: web, flavor: small, host: cn}
events:
  - {op: resize, server: web, flavor: big}
  - {op: revert, server: web}
  - {op: reconcile}
"""


def test_scenario_file_replays_nova_bug_1790204(tmp_path, capsys):
    path = tmp_path / "bug.yaml"
    path.write_text(SCENARIO)
    js = tmp_path / "run.json"
    assert cli.main(["simulate", "--scenario", str(path), "--json", str(js)]) == 0
    runs = json.loads(js.read_text())["scenarios"]["file"]
    assert runs["stock"]["operations"]["resize"] == {"succeeded": 0, "attempted": 1}
    assert runs["same_host"]["operations"]["resize"] == {"succeeded": 1,
                                                         "attempted": 1}
    assert runs["same_host"]["operations"]["reconcile fixes"] == {"fixes": 1}
    assert "revert skipped (no move in progress)" not in runs["same_host"]["counts"]
    assert runs["stock"]["counts"]["revert skipped (no move in progress)"] == 1


def test_unknown_subcommand_exits_with_usage(capsys):
    assert cli.main(["nonesuch"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "'nonesuch' is not a sub-command; one of: " in err
