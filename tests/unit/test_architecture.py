"""The layout's rules as checks that fail: the import-linter contracts in
``.importlinter`` (layers point down, nova only under ``nova/``, lab tooling
never in what a deployment runs), mypy over the whole package, no module
reaching into another's private names, no import circle between modules
(imports inside functions and under ``TYPE_CHECKING`` included), the
engine's row storage read only inside the engine, and short functions."""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "scheduler_ext"
BIN = pathlib.Path(sys.executable).parent

#: Import circles between modules that are still there, and why. The check
#: fails on any other circle, and when one of these is gone.
KNOWN_CYCLES: dict[frozenset[str], str] = {}
#: Functions allowed past 60 lines, and why (none today).
LONG_FUNCTIONS: dict[str, str] = {}
#: Underscored names of other projects that we must use: the periodic-task
#: table of nova's manager (oslo.service) and the keyword default of nova's
#: RPC signature, which the nova manager extends; ``os._exit``, the public
#: way for a forked child to end without running the parent's clean-ups;
#: the two per-request reads of nova's HostManager, which our subclass of
#: it calls on itself as nova's own ``get_host_states_by_uuids`` does.
FOREIGN_PRIVATE = {"_periodic_tasks", "_periodic_spacing",
                   "_periodic_last_run", "_sentinel", "_exit",
                   "_get_aggregates_info", "_get_instance_info"}


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


#: ``CapacityIndex``'s row storage: read by the engine's own modules only;
#: the rest of the package names providers by uuid (``row``, ``rows_of``,
#: ``live``, ``live_uuids``, ``root_of``, ``best_of``).
ROW_STORAGE = {"row_of", "alive", "sharing_set", "key_hi", "key_lo",
               "n_rows", "setups", "generations"}


def _row_storage_reads(source: str) -> list[tuple[int, str]]:
    """(line, name) of ``obj.<row storage>`` read in ``source``."""
    return [(node.lineno, node.attr) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr in ROW_STORAGE]


def test_only_the_engine_reads_the_index_rows():
    found = [f"{path}:{line}: {name}" for path, source in _modules()
             if not path.startswith("scheduler_ext/engine/")
             for line, name in _row_storage_reads(source)]
    assert found == []


def test_the_row_storage_check_can_fail():
    assert _row_storage_reads("ix.row_of.get(u)\nix.usage(u)\n") == [(1, "row_of")]


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


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Module -> the modules of ``sources`` it imports, from the AST:
    every ``import`` and ``from ... import`` wherever it sits (module
    level, inside a function, under ``if TYPE_CHECKING``). ``sources``:
    module name -> (source, whether it is a package's ``__init__``).
    ``from a import b`` names module ``a.b`` when there is one, else ``a``."""
    graph: dict[str, set[str]] = {}
    for name, (source, is_package) in sources.items():
        package = name if is_package else name.rpartition(".")[0]
        out: set[str] = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in sources)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in sources:
                        out.add(full)
                    elif base in sources:
                        out.add(base)
        out.discard(name)
        graph[name] = out
    return graph


def import_cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The sets of modules that import each other round a circle (the
    strongly connected components of more than one module; Tarjan's
    algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
    return found


def _package_graph() -> dict[str, set[str]]:
    return import_graph({_module_name(path): (path.read_text(), path.name == "__init__.py")
                         for path in sorted(PACKAGE.rglob("*.py"))})


def test_no_import_circle_between_modules():
    assert import_cycles(_package_graph()) == set(KNOWN_CYCLES)


def test_the_engine_has_no_import_circle():
    engine = {m: {t for t in targets if t.startswith("scheduler_ext.engine")}
              for m, targets in _package_graph().items()
              if m.startswith("scheduler_ext.engine")}
    assert import_cycles(engine) == set()


def test_the_import_circle_check_can_fail():
    sources = {
        "p": ("", True),
        "p.a": ("from p import b\n", False),
        "p.b": ("def f():\n    from p.c import g\n", False),
        "p.c": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    import p.a\n", False),
        "p.d": ("from . import a\n", False),
    }
    graph = import_graph(sources)
    assert graph == {"p": set(), "p.a": {"p.b"}, "p.b": {"p.c"},
                     "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert import_cycles(graph) == {frozenset({"p.a", "p.b", "p.c"})}
    assert import_cycles({"x": {"y"}, "y": set()}) == set()
