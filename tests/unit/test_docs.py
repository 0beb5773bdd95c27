"""The docs (doc/source) build with Sphinx, warnings as errors, as
contributing.rst documents, and the configuration reference holds the options
oslo_config.sphinxext generated from their definitions."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_docs_build_with_warnings_as_errors(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-E", "-q", "-b", "html",
         str(ROOT / "doc/source"), str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    pages = {p.stem for p in tmp_path.glob("*.html")}
    assert pages >= {"index", "install", "configuration", "operating",
                     "differences", "benchmarks", "design", "testing",
                     "contributing", "placement-nested-semantics",
                     "placement-overcommit"}
    reference = (tmp_path / "configuration.html").read_text()
    assert 'id="scheduler_ext.reconcile_interval"' in reference
    assert 'id="storage.probe_timeout"' in reference


def test_the_readme_documents_the_docs_build():
    readme = (ROOT / "README.rst").read_text()
    assert "    .venv/bin/sphinx-build -W -b html doc/source doc/build/html\n" in readme
    assert "doc/build/" in (ROOT / ".gitignore").read_text().splitlines()
