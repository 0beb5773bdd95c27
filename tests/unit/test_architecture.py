"""The layout's rules as checks that fail: the import-linter contracts in
``.importlinter`` (layers point down, nova only under ``nova/``, lab tooling
never in what a deployment runs), mypy over the whole package, no module
reaching into another's private names, and the size limits of the
developers' guide."""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "scheduler_ext"
BIN = pathlib.Path(sys.executable).parent

#: Functions allowed past 60 lines, and why (none today).
LONG_FUNCTIONS: dict[str, str] = {}
#: Underscored names of other projects that we must use: the periodic-task
#: table of nova's manager (oslo.service) and the keyword default of nova's
#: RPC signature, which the nova manager extends; ``os._exit``, the public
#: way for a forked child to end without running the parent's clean-ups.
FOREIGN_PRIVATE = {"_periodic_tasks", "_periodic_spacing",
                   "_periodic_last_run", "_sentinel", "_exit"}


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_import_contracts_hold():
    result = _run(str(BIN / "lint-imports"), "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_mypy_is_clean():
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), path.read_text()


def _private_uses(source: str) -> list[tuple[int, str]]:
    """(line, name) of private names used here that this module does not
    define: ``obj._name`` and ``from x import _name``."""
    tree = ast.parse(source)
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        for name in names:
            if name.startswith("_") and not name.startswith("__") and \
                    name not in defined:
                out.append((node.lineno, name))
    return out


def test_no_module_reaches_into_another_modules_private_names():
    found = [f"{path}:{line}: {name}" for path, source in _modules()
             for line, name in _private_uses(source)
             if name not in FOREIGN_PRIVATE]
    assert found == []


def test_the_private_name_check_can_fail():
    assert _private_uses("import x\nx._hidden\n") == [(2, "_hidden")]
    assert _private_uses("from x import _hidden\n") == [(1, "_hidden")]
    assert _private_uses("class A:\n    def _m(self):\n        self._m()\n") == []


def test_functions_are_short():
    long = []
    for path, source in _modules():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                name = f"{path}:{node.name}"
                if size > 60 and name not in LONG_FUNCTIONS:
                    long.append(f"{name} ({size} lines)")
    assert long == []
