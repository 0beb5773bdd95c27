"""Print the nova harness summary (counts and time) after the run."""

import sys


def pytest_terminal_summary(terminalreporter):
    module = sys.modules.get("tests.nova.test_nova_functional")
    lines = getattr(module, "SUMMARY", None)
    if lines:
        terminalreporter.section("scheduler-ext in nova's functional harness")
        for line in lines:
            terminalreporter.write_line(line)
