"""Running scheduler-ext inside nova: the only package that imports nova.

Importing this package imports nothing from nova. Its modules:

``request``
    RequestSpec and Migration to our ``ScheduleRequest``; our Selections'
    allocation requests; ``UseNova`` for what nova's own code must do.
``migrations``
    The ``pre-migrating`` Migration record of a move, one statement on
    the cell's database.
``early_reads``, ``workers``
    The refresh and a move's look-up, started on worker threads as a
    call arrives.
``ranking``
    nova's host filters and weighers as a per-call ``Ranking`` of our
    candidates.
``vector_weighing``
    nova's enabled weighers on numpy arrays, equal to nova's
    ``get_weighed_hosts`` (nova's own code for a weigher it does not know).
``host_state_view``
    nova's host states mirrored from the cells' compute node and service
    rows, refreshed by what changed.
``garbage``
    Each call's nova HostStates dropped in a thread after the answer.
``placement_client``
    Placement through nova's own report client.
``notifications``
    The reconcile woken when nova says a resize ended.
``audit``
    What ``scheduler-ext audit`` reads from nova.
``scheduler``
    ``NovaScheduler``: one select_destinations call, our Selections to
    nova's ``Selection`` objects.
``reconcile``
    Instance states read through nova's objects for the periodic
    reconcile.
``service``
    What the manager runs beside nova's code (options, placement client,
    the scheduler built as the service starts, the reconcile run).
``manager``
    For nova >= 23: a ``SchedulerManager`` subclass, run by the
    ``scheduler-ext-nova-scheduler`` service (``cmd``) in place of
    ``nova-scheduler``.
``cmd``
    The console script.
"""
