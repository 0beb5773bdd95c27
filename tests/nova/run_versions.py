"""Run the nova functional proof against several nova releases.

Usage (from the repository root; minutes per version, run it with nice)::

    nice python3 tests/nova/run_versions.py 29.0.0 34.0.0
    nice python3 tests/nova/run_versions.py --moves 29.0.0   # + nova's move suite
    python3 tests/nova/run_versions.py --probe 23.2.2 27.5.1  # install+import
    python3 tests/nova/run_versions.py --pin 'oslo.utils<8' 28.3.1

For each VERSION, in its own venv under ``--venvs`` (default
``.nova-venvs/``, reused when present): this package without extras, then
``nova==VERSION`` with the harness's test libraries and
openstack-placement, unpinned, so pip picks the releases that satisfy that
nova's own requirements. Then:

1. ``install``: pip's exit status (the tail of its error when it fails);
2. ``import``: nova's scheduler manager and functional test helpers import;
3. ``proof``: ``pytest tests/nova`` in that venv (our manager inside that
   nova's functional harness: the bug 1790204 scenarios, the reconcile
   loop and the over-hold window, the adapter units; nova's own move suite
   too with ``--moves``), its closing summary line.

One line of JSON per version goes to stdout and to ``--out``
(``benchmarks/results/nova_versions.jsonl``). A version that does not
install or import on this Python is reported as such: that is the answer
to "is it installable", not an error of the script.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
HARNESS_LIBS = ["oslotest", "testtools", "python-subunit", "stestr", "ddt",
                "requests-mock", "wsgi-intercept", "osprofiler",
                "openstack-placement", "pytest", "hypothesis"]
IMPORT_CHECK = ("import nova.scheduler.manager, "
                "nova.tests.functional.integrated_helpers")


def _run(cmd: list[str], env: dict | None = None, timeout: float = 3600
         ) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _tail(text: str, lines: int = 6) -> str:
    kept = [t for t in text.strip().splitlines() if "is ignored" not in t]
    return "\n".join(kept[-lines:])


def one(version: str, venvs: pathlib.Path, moves: bool,
        probe: bool = False, pins: tuple[str, ...] = ()) -> dict:
    """Install, import and run the proof for one nova version."""
    venv = venvs / f"nova-{version}"
    py = venv / "bin" / "python"
    out: dict = {"nova": version, "python": sys.version.split()[0]}
    if not py.exists():
        _run([sys.executable, "-m", "venv", str(venv)])
    pip = _run([str(py), "-m", "pip", "install", "-q", "-e", str(ROOT),
                f"nova=={version}", *HARNESS_LIBS, *pins])
    out["pins"] = list(pins)
    out["install"] = pip.returncode == 0
    if not out["install"]:
        out["install_error"] = _tail(pip.stderr + pip.stdout)
        return out
    imp = _run([str(py), "-c", IMPORT_CHECK])
    out["import"] = imp.returncode == 0
    if not out["import"]:
        out["import_error"] = _tail(imp.stderr)
        return out
    if probe:
        return out
    env = dict(os.environ, SCHEDULER_EXT_NOVA_MOVES="1" if moves else "0",
               PYTHONPATH=str(ROOT))
    proof = _run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                  "tests/nova"], env=env, timeout=4 * 3600)
    out["proof_exit"] = proof.returncode
    out["proof"] = _tail(proof.stdout, 30)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="+", help="nova releases (X.Y.Z)")
    parser.add_argument("--venvs", default=str(ROOT / ".nova-venvs"))
    parser.add_argument("--out", default=str(
        ROOT / "benchmarks" / "results" / "nova_versions.jsonl"))
    parser.add_argument("--probe", action="store_true",
                        help="install and import only (is it usable here?)")
    parser.add_argument("--pin", action="append", default=[],
                        help="an extra requirement, e.g. 'oslo.utils<8' "
                             "(a release's upper constraints, one by one)")
    parser.add_argument("--moves", action="store_true",
                        help="also run nova's own move suite (slow)")
    args = parser.parse_args(argv)
    venvs = pathlib.Path(args.venvs)
    venvs.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    for version in args.versions:
        result = one(version, venvs, args.moves, args.probe,
                     tuple(args.pin))
        line = json.dumps(result)
        print(line, flush=True)
        with open(args.out, "a") as fh:
            fh.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
