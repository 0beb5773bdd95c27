"""The bad-input table: over a hundred wrong command lines, files and
settings across every sub-command, each asserting its exit code (2 bad
input or configuration, 3 a service that cannot be reached), no traceback,
one line on stderr, and a message naming what was wrong in our words
(never placement's ``placement.undefined_code`` for something placement
did not say). Nothing reaches a placement: the addresses used are closed
ports, an unknown host, or a local HTTP server that is not placement.

``python -m pytest tests/unit/cmd/test_bad_input_table.py -v`` lists the
table; ``BAD_INPUT_TABLE=path`` also writes it as text (rc, message)."""

import functools
import http.server
import json
import os
import threading

import pytest

from scheduler_ext.cmd import main as cli
from tests.unit.storage.hosts import FIXTURES
from tests.unit.storage.reports import three_hosts

DOWN = "http://127.0.0.1:9"
SCENARIO_OK = ("flavors:\n  s: {VCPU: 1, MEMORY_MB: 512}\nhosts:\n  - name: cn\n"
               "    inventory:\n      VCPU: {total: 4}\n      MEMORY_MB: {total: 4096}\n"
               "events: []\n")


def _scenario(inv="{total: 4}", servers="", events="[]", flavors=None, extra=""):
    return ((flavors or "flavors:\n  s: {VCPU: 8, MEMORY_MB: 512}\n")
            + "hosts:\n  - name: cn\n    inventory:\n"
            f"      VCPU: {inv}\n      MEMORY_MB: {{total: 4096}}\n"
            + servers + f"events: {events}\n" + extra)


#: file name -> content (str or bytes), written once into the table's folder
FILES = {
    "binary": bytes(range(256)) * 4,
    "empty.yaml": "",
    "bad-yaml.yaml": "flavors: [1\n",
    "no-flavors.yaml": "flavors: {}\nhosts: []\nevents: []\n",
    "neg-total.yaml": _scenario("{total: -4}"),
    "undeclared.yaml": _scenario(events="\n  - {op: resize, server: y, flavor: s}"),
    "unknown-flavor.yaml": _scenario(events="\n  - {op: boot, server: x, flavor: nope}"),
    "bad-class.yaml": _scenario(flavors="flavors:\n  s: {NOT_A_CLASS: 1}\n"),
    "bad-op.yaml": _scenario(events="\n  - {op: fly, server: x}"),
    "nan-ratio.yaml": _scenario("{total: 4, allocation_ratio: .nan}"),
    "inf-ratio.yaml": _scenario("{total: 4, allocation_ratio: .inf}"),
    "zero-ratio.yaml": _scenario("{total: 4, allocation_ratio: 0}"),
    "reserved.yaml": _scenario("{total: 4, reserved: 5}"),
    "units.yaml": _scenario("{total: 16, min_unit: 4, max_unit: 2}"),
    "too-big.yaml": _scenario(servers="servers:\n  - {name: web, flavor: s, host: cn}\n"),
    "two-big.yaml": _scenario("{total: 12}", servers="servers:\n"
                              "  - {name: a, flavor: s, host: cn}\n"
                              "  - {name: b, flavor: s, host: cn}\n"),
    "no-class.yaml": _scenario(flavors="flavors:\n  s: {VCPU: 1, DISK_GB: 5}\n",
                               servers="servers:\n  - {name: a, flavor: s, host: cn}\n"),
    "server-twice.yaml": _scenario(flavors="flavors:\n  s: {VCPU: 1}\n", servers=(
        "servers:\n  - {name: a, flavor: s, host: cn}\n  - {name: a, flavor: s, host: cn}\n")),
    "unknown-host.yaml": _scenario(flavors="flavors:\n  s: {VCPU: 1}\n",
                                   servers="servers:\n  - {name: a, flavor: s, host: elsewhere}\n"),
    "boot-no-flavor.yaml": _scenario(events="\n  - {op: boot, server: x}"),
    "extra-key.yaml": _scenario(extra="colour: blue\n"),
    "list.yaml": "[]\n",
    "count0.yaml": SCENARIO_OK.replace("  - name: cn\n", "  - name: cn\n    count: 0\n"),
    "host-twice.yaml": SCENARIO_OK.replace(
        "events: []", "  - name: cn\n    inventory: {VCPU: {total: 1}}\nevents: []"),
    "unknown-sharing.yaml": SCENARIO_OK.replace(
        "    inventory:", "    sharing: ceph\n    inventory:"),
    "step-zero.yaml": _scenario("{total: 4, step_size: 0}"),
    "not-ini.conf": "[placement\nauth_type = x\n",
    "fence-ladder.conf": "[storage]\nfence_ladder = hard-reboot,restart-agent\n",
    "evacuation-attempts.conf": "[storage]\nevacuation_attempts = 0\n",
    "empty-placement.conf": "[placement]\n",
    "password.conf": "[placement]\nauth_type = password\n",
    "noauth.conf": "[placement]\nauth_type = noauth\n",
    "nonesuch.conf": "[placement]\nauth_type = nonesuch\n",
    "keystone-down.conf": ("[placement]\nauth_type = password\n"
                           "auth_url = http://127.0.0.1:9/v3\nusername = u\n"
                           "password = p\nproject_name = p\nuser_domain_name = Default\n"
                           "project_domain_name = Default\n"),
    "endpoint-down.conf": ("[placement]\nauth_type = admin_token\ntoken = t\n"
                           "endpoint_override = http://127.0.0.1:9\n"),
    "timeout.conf": "[placement]\nauth_type = admin_token\ntoken = t\n"
                    "endpoint_override = http://127.0.0.1:9\ntimeout = soon\n",
    "probe-neg.conf": "[storage]\nprobe_timeout = -5\n",
    "probe-text.conf": "[storage]\nprobe_timeout = abc\n",
    "ratio-text.conf": "[storage]\ndisk_allocation_ratio = lots\n",
    "dict.json": '{"a": 1}',
    "int.json": "5",
    "not-json.json": "[",
    "str-entry.json": '["x"]',
    "missing-host.json": '[{"uuid": "x"}]',
    "bad-uuid.json": json.dumps([{"uuid": "nope", "host": "x", "resources": {},
                                  "project_id": "p", "user_id": "u"}]),
    "neg-resources.json": json.dumps([{
        "uuid": "11111111-1111-1111-1111-111111111111",
        "host": "22222222-2222-2222-2222-222222222222",
        "resources": {"VCPU": -1}, "project_id": "p", "user_id": "u"}]),
    "bad-moves.json": json.dumps([{
        "uuid": "11111111-1111-1111-1111-111111111111",
        "host": "22222222-2222-2222-2222-222222222222",
        "resources": {"VCPU": 1}, "project_id": "p", "user_id": "u", "moves": 3}]),
    "empty-project.json": json.dumps([{
        "uuid": "11111111-1111-1111-1111-111111111111",
        "host": "22222222-2222-2222-2222-222222222222",
        "resources": {"VCPU": 1}, "project_id": "", "user_id": "u"}]),
    "report-v2.json": '{"version": 2}',
    "report-state.json": '{"version": 1, "host": "h", "path": "/p", "state": "maybe"}',
    "report-bytes.json": json.dumps({"version": 1, "host": "cn2", "path": "/x",
                                     "state": "shared", "total_bytes": "big"}),
    "instances.json": "[]",
    "clouds.yaml": ("clouds:\n"
                    "  keystone-down:\n    auth:\n      auth_url: http://127.0.0.1:9/v3\n"
                    "      username: u\n      password: p\n      project_name: p\n"
                    "      user_domain_name: Default\n      project_domain_name: Default\n"
                    "  placement-down:\n    auth_type: none\n"
                    "    placement_endpoint_override: http://127.0.0.1:9\n"
                    "  half:\n    auth_type: password\n    auth:\n      username: u\n"
                    "  odd-plugin:\n    auth_type: nonesuch\n"),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad-input")
    for name, content in FILES.items():
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(d / name, mode) as f:
            f.write(content)
    (d / "report-ok.json").write_text(three_hosts()[0].to_json())
    return d


@pytest.fixture(scope="module")
def web(folder):
    """A local HTTP server that is not placement (a directory listing)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    web = f"127.0.0.1:{server.server_address[1]}"
    (folder / "not-keystone.conf").write_text(
        FILES["keystone-down.conf"].replace("127.0.0.1:9", web))
    yield web
    server.shutdown()


S, B, A = ["simulate"], ["bench", "--sizes", "100"], ["audit"]
D = ["storage", "discover", "--host", "cn1", "--read-only"]
SY = ["storage", "sync"]
MD = ["storage", "migrate-disk"]
LM = ["storage", "live-migration"]
EV = ["evacuate", "plan"]

#: (argv with {d} the folder and {web} the HTTP server, exit code, what the
#: one line must say)
TABLE = [
    # simulate: flags
    (S + ["--hosts", "0"], 2, "--hosts: must be at least 1, got 0"),
    (S + ["--hosts", "-3"], 2, "--hosts: must be at least 1, got -3"),
    (S + ["--hosts", "abc"], 2, "--hosts: must be an integer, got 'abc'"),
    (S + ["--hosts", "1000001"], 2, "--hosts: must be at most 1000000"),
    (S + ["--sharing", "-1"], 2, "--sharing: must be at least 0"),
    (S + ["--sharing", "two"], 2, "--sharing: must be an integer"),
    (S + ["--steps", "-5"], 2, "--steps: must be at least 0"),
    (S + ["--steps", "1.5"], 2, "--steps: must be an integer, got '1.5'"),
    (S + ["--seed", "-1"], 2, "--seed: must be at least 0"),
    (S + ["--seed", "x"], 2, "--seed: must be an integer"),
    (S + ["--full-check-every", "-1"], 2, "--full-check-every: must be at least 0"),
    (S + ["--jobs", "0"], 2, "--jobs: must be at least 1"),
    (S + ["--jobs", "65"], 2, "--jobs: must be at most 64"),
    (S + ["--strategy", "ours"], 2, "--strategy: invalid choice: 'ours'"),
    (S + ["--scenario", "nonesuch"], 2, "--scenario nonesuch: not one of all, random"),
    (S + ["--scenario", "{d}"], 2, "--scenario {d}: cannot read"),
    (S + ["--scenario", "{d}/binary"], 2, "--scenario {d}/binary: not UTF-8"),
    (S + ["--json", "/missing/dir/x.json"], 2, "--json: /missing/dir/x.json: directory"),
    (S + ["--json", "{d}"], 2, "--json: {d}: is a directory"),
    (S + ["--plot", "/missing/dir/x.png"], 2, "--plot: /missing/dir/x.png: directory"),
    (S + ["--plot", "{d}/x.docx"], 2, "--plot {d}/x.docx: the extension names no format"),
    (S + ["--plot", "{d}/noext"], 2, "--plot {d}/noext: the extension names no format"),
    (S + ["--json", "{d}/same.png", "--plot", "{d}/same.png"], 2,
     "--json and --plot name the same file"),
    (S + ["--scenario", "bug-1790204", "--plot", "{d}/p.png"], 2,
     "--plot: the bug-1790204 scenario is one resize"),
    (S + ["-f", "xml"], 2, "-f/--format: invalid choice: 'xml'"),
    (S + ["-c", "nonesuch"], 2,
     "-c nonesuch: no such column; the columns are: scenario, measure, stock, ours"),
    (S + ["--strategy", "stock", "-c", "ours"], 2,
     "-c ours: no such column; the columns are: scenario, measure, stock"),
    (S + ["--progress=maybe"], 2, "--progress/--no-progress: ignored explicit argument 'maybe'"),
    (S + ["--nonsense"], 2, "unrecognized arguments: --nonsense"),
    (S + ["extra"], 2, "unrecognized arguments: extra"),
    # simulate: scenario files
    (S + ["--scenario", "{d}/empty.yaml"], 2, "{d}/empty.yaml: line 1: the top level"),
    (S + ["--scenario", "{d}/bad-yaml.yaml"], 2, "line 2: not valid YAML/JSON"),
    (S + ["--scenario", "{d}/no-flavors.yaml"], 2, "line 1: flavors"),
    (S + ["--scenario", "{d}/neg-total.yaml"], 2, "line 6: hosts/0/inventory/VCPU/total: -4 is less than the minimum of 1"),
    (S + ["--scenario", "{d}/undeclared.yaml"], 2, "server 'y' is not declared"),
    (S + ["--scenario", "{d}/unknown-flavor.yaml"], 2, "no flavor named 'nope'"),
    (S + ["--scenario", "{d}/bad-class.yaml"], 2, "NOT_A_CLASS"),
    (S + ["--scenario", "{d}/bad-op.yaml"], 2, "events/0/op"),
    (S + ["--scenario", "{d}/nan-ratio.yaml"], 2,
     "line 6: hosts/0/inventory/VCPU/allocation_ratio: must be a finite number"),
    (S + ["--scenario", "{d}/inf-ratio.yaml"], 2, "allocation_ratio: must be a finite"),
    (S + ["--scenario", "{d}/zero-ratio.yaml"], 2, "allocation_ratio"),
    (S + ["--scenario", "{d}/reserved.yaml"], 2,
     "line 6: hosts/0/inventory/VCPU/reserved: 5 is above total 4"),
    (S + ["--scenario", "{d}/units.yaml"], 2, "max_unit: 2 is below min_unit 4"),
    (S + ["--scenario", "{d}/too-big.yaml"], 2,
     "line 9: servers/0/host: server 'web' needs VCPU 8 but 'cn' has 4 left"),
    (S + ["--scenario", "{d}/two-big.yaml"], 2,
     "line 10: servers/1/host: server 'b' needs VCPU 8 but 'cn' has 4 left"),
    (S + ["--scenario", "{d}/no-class.yaml"], 2, "'cn' has no DISK_GB inventory"),
    (S + ["--scenario", "{d}/server-twice.yaml"], 2, "server 'a' twice"),
    (S + ["--scenario", "{d}/unknown-host.yaml"], 2, "no host named 'elsewhere'"),
    (S + ["--scenario", "{d}/boot-no-flavor.yaml"], 2, "events/0"),
    (S + ["--scenario", "{d}/extra-key.yaml"], 2, "'colour' was unexpected"),
    (S + ["--scenario", "{d}/list.yaml"], 2, "the top level"),
    (S + ["--scenario", "{d}/count0.yaml"], 2, "hosts/0/count"),
    (S + ["--scenario", "{d}/host-twice.yaml"], 2, "name 'cn' used twice"),
    (S + ["--scenario", "{d}/unknown-sharing.yaml"], 2, "no sharing provider named 'ceph'"),
    (S + ["--scenario", "{d}/step-zero.yaml"], 2, "step_size"),
    # bench
    (["bench", "--sizes", "5"], 2, "--sizes: must be at least 10, got 5"),
    (["bench", "--sizes", "1000,x"], 2, "--sizes: must be an integer, got 'x'"),
    (["bench", "--sizes", ","], 2, "--sizes: needs at least one value"),
    (["bench", "--sizes", "2000000000"], 2, "--sizes: must be at most 50000000"),
    (B + ["--repeat", "0"], 2, "--repeat: must be at least 1"),
    (B + ["--k", "0"], 2, "--k: must be at least 1"),
    (B + ["--seed", "-1"], 2, "--seed: must be at least 0"),
    (B + ["--baseline-max", "-1"], 2, "--baseline-max: must be at least 0"),
    (B + ["--baseline-requests", "0"], 2, "--baseline-requests: must be at least 1"),
    (B + ["--placement-max", "5"], 2, "--placement-max: must be at least 10"),
    (B + ["--placement-repeat", "0"], 2, "--placement-repeat: must be at least 1"),
    (B + ["--snapshot-max", "1"], 2, "--snapshot-max: must be at least 10"),
    (["bench", "--scale-out", "0"], 2, "--scale-out: must be at least 1"),
    (["bench", "--scale-out", "65"], 2, "--scale-out: must be at most 64"),
    (B + ["--scale-out-ops", "0"], 2, "--scale-out-ops: must be at least 1"),
    (["bench", "--nested", "5"], 2, "--nested: must be at least 10"),
    (["bench", "--nested", "abc"], 2, "--nested: must be an integer"),
    (["bench", "--nested", "10", "--sizes", "100"], 2,
     "--sizes: not allowed with argument --nested"),
    (["bench", "--scale-out", "1", "--nested", "10"], 2,
     "--nested: not allowed with argument --scale-out"),
    (B + ["--json", "/missing/dir/x.json"], 2, "--json: /missing/dir/x.json: directory"),
    (B + ["-f", "html"], 2, "-f/--format: invalid choice: 'html'"),
    (B + ["-c", "nonesuch"], 2,
     "-c nonesuch: no such column; the columns are: providers"),
    (["bench", "--nested", "10", "-c", "select median ms"], 2,
     "-c select median ms: no such column; the columns are: compute nodes"),
    (A + ["--placement-url", DOWN, "-c", "nonesuch"], 2,
     "-c nonesuch: no such column; the columns are: kind, subject, detail, state"),
    (SY + ["{d}/report-ok.json", "--placement-url", DOWN, "-c", "x"], 2,
     "-c x: no such column; the columns are: action, what"),
    # audit: where placement is
    (A, 2, "nothing says where placement is"),
    (A + ["--placement-url", "not-a-url"], 2,
     "--placement-url not-a-url: not an http:// or https:// URL"),
    (A + ["--placement-url", "ftp://x"], 2, "--placement-url ftp://x: not an http://"),
    (A + ["--placement-url", "http://host:port/"], 2,
     "--placement-url http://host:port/: the port must be a number"),
    (A + ["--placement-url", "http://127.0.0.1:99999"], 2,
     "--placement-url http://127.0.0.1:99999: the port must be a number from 1 to 65535"),
    (A + ["--placement-url", "http://127.0.0.1:0"], 2, "the port must be a number"),
    (A + ["--placement-url", DOWN], 3,
     "placement unreachable: connection refused (nothing listens there) (http://127.0.0.1:9/)"),
    (A + ["--placement-url", "http://no-such-host.invalid:8778"], 3,
     "placement unreachable: unknown host (http://no-such-host.invalid:8778/)"),
    (A + ["--placement-url", "https://{web}"], 3, "placement unreachable: TLS handshake failed"),
    (A + ["--placement-url", "http://{web}"], 3, "the answer is not JSON"),
    (A + ["--no-nova", "--placement-url", DOWN], 2, "--no-nova: only with --config-file"),
    (A + ["--no-nova"], 2, "--no-nova: only with --config-file"),
    (A + ["--os-cloud", "nonesuch"], 2, "--os-cloud nonesuch: Cloud nonesuch was not found"),
    (A + ["--os-cloud", "keystone-down"], 3,
     "--os-cloud keystone-down: keystone could not be reached: connection refused"),
    (A + ["--os-cloud", "placement-down"], 3, "placement unreachable: connection refused"),
    (A + ["--os-cloud", "half"], 2, "--os-cloud half: the auth plugin needs auth_url"),
    (A + ["--os-cloud", "odd-plugin"], 2, "--os-cloud odd-plugin"),
    (A + ["--os-cloud", "x", "--placement-url", DOWN], 2,
     "--placement-url: not allowed with argument --os-cloud"),
    # audit: nova.conf
    (A + ["--config-file", "/missing/nova.conf"], 2, "--config-file /missing/nova.conf: no such file"),
    (A + ["--config-file", "{d}", "--no-nova"], 2, "--config-file {d}: a directory"),
    (A + ["--config-file", "{d}/binary", "--no-nova"], 2, "--config-file {d}/binary: not UTF-8"),
    (A + ["--config-file", "{d}/not-ini.conf", "--no-nova"], 2, "not an INI file"),
    (A + ["--config-file", "{d}/empty-placement.conf", "--no-nova"], 2,
     "[placement] sets neither auth_type nor endpoint_override"),
    (A + ["--config-file", "{d}/password.conf", "--no-nova"], 2,
     "[placement] auth_type = password needs auth_url"),
    (A + ["--config-file", "{d}/noauth.conf", "--no-nova"], 2, "auth_type = noauth needs"),
    (A + ["--config-file", "{d}/nonesuch.conf", "--no-nova"], 2,
     "auth_type = nonesuch: no such keystoneauth plugin"),
    (A + ["--config-file", "{d}/keystone-down.conf", "--no-nova"], 3,
     "[placement]: keystone could not be reached: connection refused"),
    (A + ["--config-file", "{d}/not-keystone.conf", "--no-nova"], 2,
     "[placement]: keystone answered: "),
    (A + ["--config-file", "{d}/endpoint-down.conf", "--no-nova"], 3,
     "placement unreachable: connection refused"),
    (A + ["--config-file", "{d}/timeout.conf", "--no-nova"], 2,
     "[placement] timeout: could not convert string to float: 'soon'"),
    # audit: the instances file
    (A + ["--placement-url", DOWN, "--instances", "/missing.json"], 2,
     "--instances: /missing.json: no such file"),
    (A + ["--placement-url", DOWN, "--instances", "{d}/binary"], 2, "not UTF-8"),
    (A + ["--placement-url", DOWN, "--instances", "{d}/not-json.json"], 2, "not JSON"),
    (A + ["--placement-url", DOWN, "--instances", "{d}/dict.json"], 2,
     "must be a JSON list of instances, got dict"),
    (A + ["--placement-url", DOWN, "--instances", "{d}/int.json"], 2,
     "must be a JSON list of instances, got int"),
    (A + ["--placement-url", DOWN, "--instances", "{d}/str-entry.json"], 2,
     "entry 0: must be an object"),
    (A + ["--placement-url", DOWN, "--instances", "{d}/missing-host.json"], 2,
     "entry 0: missing 'host'"),
    (A + ["--placement-url", DOWN, "--instances", "{d}/bad-uuid.json"], 2,
     "entry 0: uuid: not a UUID: 'nope'"),
    (A + ["--placement-url", DOWN, "--instances", "{d}/neg-resources.json"], 2,
     "resources.VCPU: must be a positive integer, got -1"),
    (A + ["--placement-url", DOWN, "--instances", "{d}/bad-moves.json"], 2,
     "moves: must be a list"),
    (A + ["--placement-url", DOWN, "--instances", "{d}/empty-project.json"], 2,
     "project_id: must be a non-empty string"),
    (A + ["--placement-url", DOWN, "--export", "/missing/dir/x.json"], 2,
     "--export: /missing/dir/x.json: directory"),
    (A + ["--placement-url", DOWN, "--export", "{d}/out.json"], 2,
     "--export: nothing to export"),
    (A + ["--placement-url", DOWN, "-f", "xml"], 2, "-f/--format: invalid choice"),
    (A + ["--bogus"], 2, "unrecognized arguments: --bogus"),
    # storage discover
    (D + ["--path", "relative/dir"], 2, "--path must be absolute"),
    (D + ["--path", "/nonexistent/instances"], 2, "path /nonexistent/instances"),
    (["storage", "discover", "--path", "/tmp", "--host", "bad host"], 2,
     "not a valid host name"),
    (D + ["--path", "/tmp", "--config-file", "/nonexistent.conf"], 2,
     "--config-file /nonexistent.conf: no such file"),
    (D + ["--path", "/tmp", "--mountinfo", "/nonexistent/mountinfo"], 2,
     "/nonexistent/mountinfo"),
    (D + ["--path", "/tmp", "--mountinfo", "{d}/binary"], 2, "--mountinfo {d}/binary: not UTF-8"),
    (D + ["--path", "/tmp", "--fstab", "{d}/binary"], 2, "--fstab {d}/binary: not UTF-8"),
    (D + ["--path", "/tmp", "--mountinfo", str(FIXTURES / "broken.mountinfo")], 2, "line 2"),
    (D + ["--path", "/tmp", "--config-file", "{d}/probe-neg.conf"], 2,
     "[storage] probe_timeout: Should be greater than or equal to 0.1"),
    (D + ["--path", "/tmp", "--config-file", "{d}/probe-text.conf"], 2,
     "[storage] probe_timeout"),
    (D + ["--path", "/tmp", "--config-file", "{d}/not-ini.conf"], 2, "not an INI file"),
    (D + ["--path", "/tmp", "--output", "/missing/dir/r.json"], 2,
     "--output: /missing/dir/r.json: directory"),
    (D + ["--path", "/tmp", "-f", "xml"], 2, "-f/--format: invalid choice"),
    # storage sync
    (SY, 2, "the following arguments are required: reports"),
    (SY + ["/missing.json", "--placement-url", DOWN], 2, "/missing.json: cannot read"),
    (SY + ["{d}/not-json.json", "--placement-url", DOWN], 2, "not JSON"),
    (SY + ["{d}/instances.json", "--placement-url", DOWN], 2, "a report is a JSON object"),
    (SY + ["{d}/report-v2.json", "--placement-url", DOWN], 2, "version 2 is not 1"),
    (SY + ["{d}/binary", "--placement-url", DOWN], 2, "{d}/binary: not UTF-8"),
    (SY + ["{d}/report-state.json", "--placement-url", DOWN], 2, "state 'maybe' is not one of"),
    (SY + ["{d}/report-bytes.json", "--placement-url", DOWN], 2,
     "field 'total_bytes' must be int or null"),
    (SY + ["{d}/report-ok.json"], 2, "nothing says where placement is"),
    (SY + ["{d}/report-ok.json", "--placement-url", DOWN], 3,
     "placement unreachable: connection refused"),
    (SY + ["{d}/report-ok.json", "--config-file", "{d}/empty-placement.conf"], 2,
     "[placement] sets neither auth_type nor endpoint_override"),
    (SY + ["{d}/report-ok.json", "--config-file", "{d}/ratio-text.conf"], 2,
     "[storage] disk_allocation_ratio"),
    (SY + ["{d}/report-ok.json", "--os-cloud", "nonesuch"], 2,
     "--os-cloud nonesuch: Cloud nonesuch was not found"),
    (SY + ["{d}/report-ok.json", "--config-file", "{d}/keystone-down.conf"], 3,
     "keystone could not be reached"),
    # storage migrate-disk
    (MD, 2, "nothing says where placement is"),
    (MD + ["--placement-url", DOWN], 3, "placement unreachable: connection refused"),
    (MD + ["--placement-url", "ftp://x"], 2, "not an http:// or https:// URL"),
    # storage live-migration
    (LM, 2, "the following arguments are required: server, destination, --reports"),
    (LM + ["s", "cn2", "--reports", "{d}/report-ok.json"], 2,
     "nothing says where nova's compute API is"),
    (LM + ["s", "cn2", "--reports", "{d}/report-ok.json", "--compute-url", "ftp://x"],
     2, "--compute-url ftp://x: not an http:// or https:// URL"),
    (LM + ["s", "cn2", "--reports", "{d}/report-ok.json", "--compute-url", DOWN], 3,
     "compute API unreachable"),
    (LM + ["s", "cn2", "--reports", "{d}/report-ok.json", "--compute-url", DOWN,
           "--libvirt-version", "eight"], 2, "--libvirt-version eight: expected numbers"),
    (LM + ["s", "cn2", "--reports", "{d}/report-ok.json", "--compute-url", DOWN,
           "--source-conf", "{d}/not-ini.conf"], 2, "--source-conf {d}/not-ini.conf"),
    (LM + ["s", "cn2", "--reports", "{d}/not-json.json", "--compute-url", DOWN], 2,
     "not JSON"),
    (LM + ["s", "cn2", "--reports", "{d}/report-ok.json", "--compute-url", DOWN,
           "--block-migration", "maybe"], 2, "--block-migration: invalid choice"),
    # evacuate plan / run
    (EV, 2, "the following arguments are required: --reports, --state"),
    (EV + ["--reports", "{d}/report-ok.json", "--state", "{d}/not-json.json",
           "--compute-url", DOWN], 2, "--state {d}/not-json.json: not JSON"),
    (EV + ["--reports", "{d}/report-ok.json", "--state", "{d}/instances.json",
           "--compute-url", DOWN], 2, "--state {d}/instances.json: not a planner state"),
    (EV + ["--reports", "{d}/report-ok.json", "--state", "{d}/no-state.json",
           "--storage-view", "{d}/instances.json", "--compute-url", DOWN], 2,
     "--storage-view {d}/instances.json: expected"),
    (EV + ["--reports", "{d}/report-ok.json", "--state", "{d}/no-state.json",
           "--compute-url", DOWN], 3, "compute API unreachable"),
    (["evacuate", "run", "--reports", "{d}/report-ok.json", "--state",
      "{d}/no-state.json", "--config-file", "{d}/fence-ladder.conf", "--compute-url",
      DOWN], 2, "[storage] fence_ladder"),
    (["evacuate", "run", "--reports", "{d}/report-ok.json", "--state",
      "{d}/no-state.json", "--config-file", "{d}/evacuation-attempts.conf",
      "--compute-url", DOWN], 2, "[storage] evacuation_attempts"),
    (EV + ["--reports", "{d}/report-ok.json", "--state", "{d}/no-state.json",
           "--compute-url", DOWN, "--placement-url", "ftp://x"], 2,
     "--placement-url ftp://x: not an http:// or https:// URL"),
    # the command itself
    (["nonesuch"], 2, "'nonesuch' is not a sub-command; one of: audit, bench"),
    (["storage"], 2, "'storage' is not a sub-command"),
    ([], 2, None),
    (["--bogus-global"], 2, "'--bogus-global' is not a sub-command"),
    (["--log-file", "/missing/dir/log"] + S, 2,
     "--log-file: /missing/dir/log: directory /missing/dir does not exist"),
    (S + ["-v", "-q"], 2, "-q/--quiet: not allowed with argument -v/--verbose"),
]


def _fill(text, folder, web):
    return text.replace("{d}", str(folder)).replace("{web}", web)


@pytest.fixture(scope="module")
def rows():
    found = []
    yield found
    out = os.environ.get("BAD_INPUT_TABLE")
    if out:
        with open(out, "w") as f:
            f.write(f"{len(found)} bad inputs, 0 tracebacks ({{d}}: the "
                    "test's folder of bad files)\n")
            for argv, code, line in found:
                f.write(f"rc={code}  scheduler-ext {' '.join(argv)}\n    {line}\n")


@pytest.mark.parametrize("argv, code, needle", TABLE,
                         ids=[" ".join(a)[:70] or "(nothing)" for a, _, _ in TABLE])
def test_bad_input(argv, code, needle, folder, web, rows, capsys, monkeypatch):
    for name in [k for k in os.environ if k.startswith("OS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(folder / "clouds.yaml"))
    argv = [_fill(a, folder, web) for a in argv]
    try:
        got = cli.main(argv)
    except SystemExit as exc:       # argparse's own exit
        got = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "placement.undefined_code" not in err, err
    assert got == code, (got, err)
    if needle is None:              # no sub-command: the help, on stdout
        assert "Commands:" in out
        rows.append((argv, got, "(the help)"))
        return
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert _fill(needle, folder, web) in lines[0], lines[0]
    rows.append(([a.replace(str(folder), "{d}") for a in argv], got,
                 lines[0].replace(str(folder), "{d}")))


def test_the_table_is_long_enough():
    assert len(TABLE) >= 100
    assert {a[0] for a, _, _ in TABLE if a} >= {"simulate", "bench", "audit", "storage"}
