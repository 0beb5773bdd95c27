"""Run more of nova's own functional tests, unchanged, with scheduler-ext's
manager and (for each that fails with ours) with nova's own scheduler, and
report every test that passes with nova's only. A documented sweep, not
part of the test command (it takes tens of minutes):

    .venv/bin/python -m tests.nova.sweep --out /tmp/sweep test_server_group test_aggregates

Modules are named under ``nova.tests.functional`` (``test_servers``,
``regressions.test_bug_1790204``, ``regressions`` for every regression
module); ``module:Class+Class`` selects classes. Tests of the CI's move
suite (``cases_moving``) are left out: CI runs them. Exit status 1 when a
test passes with nova's scheduler only and is not a known difference.
"""

from __future__ import annotations

import collections
import importlib
import importlib.util
import os
import pathlib
import pkgutil
import sys

from scheduler_ext.cmd import common
from tests.nova import nova_run, pairs
from tests.nova.cases_moving import NOVA_MOVE_TESTS
from tests.nova.cases_sweep import PREFIX, selection
from tests.nova.known_differences import KNOWN_DIFFERENCES, SWEEP_DIFFERENCES

KNOWN = {**{k: d.reason for k, d in KNOWN_DIFFERENCES.items()}, **SWEEP_DIFFERENCES}

SWEEP = "tests.nova.cases_sweep"


def modules(names: list[str]) -> list[str]:
    """The modules ``names`` select (``regressions``: every regression
    module); UsageError naming the first module or class nova does not
    have."""
    out = []
    for name in names:
        module, _, classes = name.partition(":")
        try:
            found = importlib.util.find_spec(PREFIX + module)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise common.UsageError(f"{name}: no module {PREFIX}{module}")
        try:
            loaded = importlib.import_module(PREFIX + module)
        except Exception as exc:    # a module of nova's that does not import here
            raise common.UsageError(f"{name}: {PREFIX}{module} does not "
                                    f"import: {exc}") from exc
        missing = [c for c in filter(None, classes.split("+"))
                   if not hasattr(loaded, c)]
        if missing:
            raise common.UsageError(f"{name}: no class {missing[0]} in {PREFIX}{module}")
        if module == "regressions":
            out += [f"regressions.{m.name}" for m in
                    pkgutil.iter_modules(found.submodule_search_locations or [])
                    if m.name.startswith("test_")]
        else:
            out.append(name)
    return out


def _key(test_id: str) -> str:
    """``<module>__<Class>.<test>`` of one of our pair's test ids."""
    cls, name = test_id.rsplit(".", 2)[-2:]
    return cls.partition("__")[2] + "." + name


def expected_failures(selected: list[str]) -> set[str]:
    """The keys of the tests nova marks ``expectedFailure``: testtools
    cannot load them by name, so the sweep leaves them out (and says so)."""
    return {f"{short}__{cls.__name__}.{name}"
            for short, cls in pairs.nova_classes(selection(",".join(selected)))
            for name in dir(cls) if name.startswith("test") and
            getattr(getattr(cls, name), "__unittest_expecting_failure__", False)}


def _in_move_suite(test_id: str) -> bool:
    cls = test_id.rsplit(".", 2)[-2]
    short, name = cls.split("__")[1:3]
    for module, classes in NOVA_MOVE_TESTS:
        if module.rsplit(".", 1)[1] == short and (classes is None or name in classes):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = common.Parser(prog="python -m tests.nova.sweep",
                           description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+",
                        help="modules under nova.tests.functional")
    parser.add_argument("--out", required=True, type=common.writable_dir,
                        help="directory for report.md and the failures' details")
    parser.add_argument("--workers", type=common.count(1), default=2)
    args = parser.parse_args(argv)
    try:
        selected = modules(args.modules)
    except common.UsageError as exc:
        parser.error(str(exc))
    os.environ["SCHEDULER_EXT_NOVA_SWEEP"] = ",".join(selected)
    try:
        ids = nova_run.list_tests([SWEEP])
    except RuntimeError as exc:     # a module that does not import
        parser.error(str(exc).strip().splitlines()[-1])
    xfail = expected_failures(selected)
    ours = [i for i in ids if ".Ours__" in i and not _in_move_suite(i)
            and _key(i) not in xfail]
    if not ours:
        parser.error(f"no nova test outside the CI's move suite in {args.modules}"
                     + (f" ({len(xfail)} marked expectedFailure by nova, left out)"
                        if xfail else ""))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"sweep: {len(ours)} tests with ours", flush=True)
    results, seconds = nova_run.run_tests(ours, workers=args.workers, timeout=6 * 3600)
    raced = [i for i, r in results.items() if nova_run.raced(r)]
    if raced:
        more, more_s = nova_run.run_isolated(raced, workers=args.workers)
        results.update(more)
        seconds += more_s
    failed = [i for i, r in results.items() if r.status not in ("success", "skip")]
    twins = [i.replace(".Ours__", ".Stock__", 1) for i in failed]
    print(f"sweep: {len(failed)} fail with ours; running nova's scheduler on them",
          flush=True)
    stock, stock_s = nova_run.run_isolated(twins, workers=args.workers)
    return _report(out, results, stock, seconds + stock_s, sorted(xfail))


def _report(out: pathlib.Path, results: dict, stock: dict, seconds: float,
            left_out: list[str]) -> int:
    counts = collections.Counter(r.status for r in results.values())
    differ, both = [], []
    for test_id, r in sorted(results.items()):
        if r.status in ("success", "skip"):
            continue
        twin = stock.get(test_id.replace(".Ours__", ".Stock__", 1))
        key = _key(test_id)
        (differ if twin is not None and twin.status == "success" else both).append(key)
        (out / f"{key}.txt").write_text(r.details)
    unknown = [k for k in differ if k not in KNOWN]
    lines = [f"# nova functional sweep: {len(results)} tests with ours, "
             f"{seconds:.0f} s", "",
             "with ours: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
             f"pass with nova's scheduler only: {len(differ)} "
             f"({len(unknown)} not known differences)",
             f"fail with both: {len(both)}",
             f"left out, marked expectedFailure by nova: {len(left_out)}", ""]
    lines += [f"- differs: {k}: " + KNOWN.get(k, "NOT A KNOWN DIFFERENCE")
              for k in differ]
    lines += [f"- fails with both: {k}" for k in both]
    lines += [f"- left out (expectedFailure): {k}" for k in left_out]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main())
