"""Running scheduler-ext inside nova.

Importing this package imports nothing from nova. Its modules:

``adapter``
    Everything that reads or builds nova objects: RequestSpec and Migration
    to ``ScheduleRequest``, nova's request filters, host filters and
    weighers applied to our engine's candidates, our Selections to nova's
    ``Selection`` objects, and the instance states the periodic reconcile
    works on.
``manager``
    For nova >= 23: a ``SchedulerManager`` subclass, run by the
    ``scheduler-ext-nova-scheduler`` service (``cmd``) in place of
    ``nova-scheduler``.
``driver``
    For nova <= 22: the ``nova.scheduler.driver`` entry point
    ``scheduler_ext`` (``[scheduler] driver = scheduler_ext``).
``cmd``
    The console script.
"""
