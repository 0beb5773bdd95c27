"""scheduler_ext.storage is its own layer: it imports placement, errors and
conf of scheduler-ext (and itself), nothing else of it, and never nova."""

import ast
import pathlib

import scheduler_ext.storage

PACKAGE = pathlib.Path(scheduler_ext.storage.__file__).parent
ALLOWED = ("scheduler_ext.storage", "scheduler_ext.placement",
           "scheduler_ext.errors", "scheduler_ext.conf")


def imports(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names
                      if node.module == "scheduler_ext"}
    return found


def offending(source: str) -> set[str]:
    return {m for m in imports(source)
            if m == "nova" or m.startswith("nova.") or (
                m.startswith("scheduler_ext") and m != "scheduler_ext"
                and not m.startswith(ALLOWED))}


def test_storage_imports_only_its_allowed_layers():
    bad = {path.name: offending(path.read_text())
           for path in sorted(PACKAGE.glob("*.py"))}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_check_can_fail():
    assert offending("from scheduler_ext.driver import make_conf\n") == \
        {"scheduler_ext.driver"}
    assert offending("import nova.objects\n") == {"nova.objects"}
    assert offending("from scheduler_ext import lab\n") == {"scheduler_ext.lab"}
