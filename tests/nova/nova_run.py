"""Run nova TestCase classes in subprocesses and collect their results.

nova's TestCase deletes its instance attributes after each test, which
pytest's runner does not survive, so the ``cases_*`` modules run under
python-subunit's runner (``python -m subunit.run``), split over a few
worker processes; the subunit v2 streams are parsed here.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class Result:
    test_id: str
    status: str             # success, fail, skip, ...
    seconds: float
    details: str            # the traceback (and captured logs) of a failure
    traceback: str = ""     # the traceback alone (what the test raised)
    log: str = ""           # the captured log, of a success too

    @property
    def name(self) -> str:
        return self.test_id.rsplit(".", 1)[-1]

    @property
    def cls(self) -> str:
        return self.test_id.rsplit(".", 2)[-2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("OS_TEST_TIMEOUT", "240")    # nova's per-test timeout
    return env


def list_tests(targets: list[str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "testtools.run", "--list", *targets],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"listing {targets} failed:\n{out.stdout}\n{out.stderr}")
    prefixes = tuple(t + "." for t in targets)
    return [line.strip() for line in out.stdout.splitlines()
            if line.strip().startswith(prefixes)]


def _parse(stream: bytes) -> list[Result]:
    import subunit
    import testtools

    results: list[Result] = []

    def on_test(test: dict) -> None:
        if test["status"] in (None, "exists", "inprogress"):
            return
        start, stop = (list(test["timestamps"]) + [None, None])[:2]
        seconds = (stop - start).total_seconds() if start and stop else 0.0
        text, traceback, log = [], "", []
        for name, content in test["details"].items():
            try:
                body = content.as_text()
            except Exception:   # binary attachment
                continue
            if name == "traceback":
                traceback = body
            elif name.startswith("pythonlogging"):
                log.append(body)
            if name in ("traceback", "reason") or test["status"] == "fail":
                text.append(f"--- {name}\n" + body)
        results.append(Result(test["id"], test["status"], seconds,
                              "\n".join(text), traceback, "\n".join(log)))

    parser = subunit.ByteStreamToStreamResult(io.BytesIO(stream),
                                              non_subunit_name="stdout")
    sink = testtools.StreamToDict(on_test)
    sink.startTestRun()
    parser.run(sink)
    sink.stopTestRun()
    return results


#: what a test's traceback says when an earlier test of its process had
#: nova's process-wide executors shut down
RACED = "shutdown has been started"


def raced(result: Result) -> bool:
    """Failed because an earlier test of its process shut nova's executors
    down: the traceback (not the log, which may quote any test) says so."""
    return result.status != "success" and RACED in result.traceback


def run_isolated(test_ids: list[str], workers: int = 2,
                 timeout: float = 3 * 3600) -> tuple[dict[str, Result], float]:
    """Each test in a process of its own (``workers`` at a time): nova 34's
    graceful service shutdown runs in a background thread and can shut the
    process-wide executors down after a test's fixtures are gone, failing
    every later test of that process (``RACED``), ours or nova's."""
    started = time.monotonic()
    results: dict[str, Result] = {}
    for i in range(0, len(test_ids), workers):
        left = max(60.0, timeout - (time.monotonic() - started))
        batch, _ = run_tests(test_ids[i:i + workers], workers, left)
        results.update(batch)
    return results, time.monotonic() - started


def run_tests(test_ids: list[str], workers: int = 2,
              timeout: float = 40 * 60) -> tuple[dict[str, Result], float]:
    """Run the tests over ``workers`` processes; (results by id, seconds)."""
    started = time.monotonic()
    chunks = [test_ids[i::workers] for i in range(workers)]
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, chunk in enumerate(c for c in chunks if c):
            path = pathlib.Path(tmp, f"worker{i}.subunit")
            out = open(path, "wb")
            err = open(pathlib.Path(tmp, f"worker{i}.err"), "wb")
            procs.append((subprocess.Popen(
                [sys.executable, "-m", "subunit.run", *chunk], cwd=ROOT,
                env=_env(), stdout=out, stderr=err), path, out, err, chunk))
        results: dict[str, Result] = {}
        for proc, path, out, err, chunk in procs:
            left = max(1.0, timeout - (time.monotonic() - started))
            try:
                proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            out.close()
            err.close()
            for r in _parse(path.read_bytes()):
                results[r.test_id] = r
            for test_id in chunk:
                if test_id not in results:
                    tail = pathlib.Path(err.name).read_bytes()[-4000:]
                    results[test_id] = Result(
                        test_id, "missing", 0.0,
                        f"no result (worker exit {proc.returncode}):\n"
                        + tail.decode(errors="replace"))
    return results, time.monotonic() - started
