"""Running scheduler-ext inside nova: the only package that imports nova.

Importing this package imports nothing from nova. Its modules:

``request``
    RequestSpec and Migration to our ``ScheduleRequest``; our Selections'
    allocation requests; ``UseNova`` for what nova's own code must do.
``ranking``
    nova's host filters and weighers as a per-call ``Ranking`` of our
    candidates.
``garbage``
    Each call's nova HostStates dropped in a thread after the answer.
``scheduler``
    ``NovaScheduler``: one select_destinations call, our Selections to
    nova's ``Selection`` objects.
``reconcile``
    Instance states read through nova's objects for the periodic
    reconcile.
``service``
    What the manager and the driver share (options, placement client,
    the scheduler built as the service starts, the reconcile run).
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
