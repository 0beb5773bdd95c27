"""nova's own test classes, unchanged, as pairs: one with scheduler-ext's
manager in place of nova's (``Ours__<module>__<class>``), one with nova's
own scheduler (``Stock__<module>__<class>``). The only difference within
a pair is the scheduler service's manager class, passed to nova's own
``start_service`` (``harness.SchedulerExtMixin``); both find nova's
api-paste.ini the same way (``harness.PasteConfigMixin``)."""

from __future__ import annotations

import importlib
import inspect
import unittest
from typing import Iterator, Sequence

from tests.nova.harness import PasteConfigMixin, SchedulerExtMixin

#: a selection: (nova module, class names or None for every test class
#: defined in the module)
Selection = Sequence[tuple[str, Sequence[str] | None]]


def nova_classes(selection: Selection) -> Iterator[tuple[str, type]]:
    """(module short name, class) of every nova test class selected;
    LookupError for a class name the module does not define."""
    for module_name, names in selection:
        module = importlib.import_module(module_name)
        short = module_name.rsplit(".", 1)[1]
        missing = sorted(set(names or ()) - set(vars(module)))
        if missing:
            raise LookupError(f"{module_name} has no class {', '.join(missing)}")
        for name, cls in sorted(vars(module).items()):
            if not (inspect.isclass(cls) and issubclass(cls, unittest.TestCase)
                    and cls.__module__ == module_name):
                continue
            if names is not None and name not in names:
                continue
            if not any(n.startswith("test") for n in dir(cls)):
                continue
            yield short, cls


def pair(short: str, cls: type, module: str) -> tuple[type, type]:
    """(ours, stock) subclasses of nova's ``cls``, defined in ``module``."""
    base = f"{short}__{cls.__name__}"
    doc = f"nova's {short}.{cls.__name__}, unchanged"
    ours = type(f"Ours__{base}", (SchedulerExtMixin, cls),
                {"__doc__": doc + ", with scheduler-ext's manager",
                 "__module__": module})
    stock = type(f"Stock__{base}", (PasteConfigMixin, cls),
                 {"__doc__": doc + ", with nova's scheduler",
                  "__module__": module})
    return ours, stock


def define_pairs(selection: Selection, namespace: dict) -> None:
    """Put the pair of every selected class into ``namespace`` (a module's
    globals, where testtools finds them)."""
    for short, cls in nova_classes(selection):
        for made in pair(short, cls, namespace["__name__"]):
            namespace[made.__name__] = made
