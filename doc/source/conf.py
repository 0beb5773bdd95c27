"""Sphinx configuration of scheduler-ext's docs.

Build: ``.venv/bin/sphinx-build -b html doc/source doc/build/html``. The
default theme, no network: openstackdocstheme is not required."""

import os
import sys

# the option definitions are read from this checkout, not an installed copy
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

project = "scheduler-ext"
copyright = "scheduler-ext authors"
extensions = ["oslo_config.sphinxext"]
exclude_patterns = []
html_theme = "alabaster"
html_static_path = []
