"""nova's own test classes named by ``SCHEDULER_EXT_NOVA_SWEEP``, unchanged,
as Ours/Stock pairs (``pairs``). Run by ``sweep.py``, never by the test
command: the variable holds ``module[:Class+Class],...`` (modules under
``nova.tests.functional``, dotted from there: ``test_servers``,
``regressions.test_bug_1790204:Bug1790204``)."""

import os

from tests.nova.pairs import define_pairs

PREFIX = "nova.tests.functional."


def selection(text: str) -> list:
    """The ``pairs.Selection`` a ``SCHEDULER_EXT_NOVA_SWEEP`` value names."""
    out = []
    for item in filter(None, (i.strip() for i in text.split(","))):
        module, _, names = item.partition(":")
        out.append((PREFIX + module, names.split("+") if names else None))
    return out


define_pairs(selection(os.environ.get("SCHEDULER_EXT_NOVA_SWEEP", "")), globals())
