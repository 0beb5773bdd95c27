"""nova's own move tests, unchanged, run twice: with scheduler-ext's
manager in place of nova's (``Ours_*``) and with nova's own scheduler
(``Stock_*``). Run by ``test_nova_functional.py``.

Nothing of nova's is overridden: the only difference between the two
classes of a pair is the scheduler service's manager class, passed to
nova's own ``start_service`` (``harness.SchedulerExtMixin``), and both
find nova's api-paste.ini the same way (``harness.PasteConfigMixin``). No
``[placement]`` option, no reconcile call, no helper is added: our
service talks to placement through the report client nova's harness
configures, and its reconcile runs in its own loop as in a deployment.
The tests that fail with ours and pass with nova's are listed, with the
reason, in doc/source/differences.rst ("nova's own tests").
"""

from tests.nova.pairs import define_pairs

#: nova's move tests: (module, class names; None for every test class
#: defined in the module)
NOVA_MOVE_TESTS = [
    ("nova.tests.functional.test_servers",
     ["ServerMovingTests", "ServerRescheduleTests"]),
    ("nova.tests.functional.test_cold_migrate", None),
] + [(f"nova.tests.functional.regressions.test_bug_{bug}", None) for bug in (
    # the regressions that resize or cold-migrate (libvirt-only ones left
    # out: 1983753, 2007968 need the libvirt fixture)
    "1669054", "1718512", "1741125", "1764556", "1781286", "1790204",
    "1797580", "1815153", "1825020", "1825537", "1830747", "1843090",
    "1845291", "1848343", "1879878", "1938326", "2108974")]


define_pairs(NOVA_MOVE_TESTS, globals())
