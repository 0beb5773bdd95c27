"""``scheduler-ext-nova-scheduler``: nova-scheduler with scheduler-ext.

A drop-in for the ``nova-scheduler`` command of nova 23 and later: the same
arguments (``--config-file``, ``--config-dir``...), the same nova.conf, the
same service binary name and RPC topic, so conductors and computes talk to
it as to nova's; only the manager class differs
(``scheduler_ext.nova.manager.SchedulerManager``). Run one or several
instead of (not beside) ``nova-scheduler``.
"""

from __future__ import annotations

import sys

MANAGER = "scheduler_ext.nova.manager.SchedulerManager"


def _monkey_patch() -> None:
    """What nova's own service scripts do first: nova 2025.1 and later
    choose eventlet or native threads from the configuration (the scheduler
    defaults to threads); older releases patch with eventlet on import."""
    from nova import monkey_patch
    patch = getattr(monkey_patch, "patch", None)
    if patch is None:
        return
    try:
        patch(backend="threading")
    except TypeError:       # a release whose patch() takes no backend
        patch()


def main(argv: list[str] | None = None) -> None:
    _monkey_patch()

    from oslo_concurrency import processutils
    from oslo_log import log as logging

    import nova.conf
    from nova import config
    from nova import objects
    from nova.scheduler import rpcapi
    from nova import service

    from scheduler_ext import errors
    from scheduler_ext.nova import service as ext_service

    conf = nova.conf.CONF
    ext_service.register_opts(conf)
    config.parse_args(sys.argv if argv is None else argv)
    logging.setup(conf, "nova")
    objects.register_all()
    objects.Service.enable_min_version_cache()   # as nova-scheduler does

    try:
        # before the workers fork: a bad option stops the start once
        ext_service.check_database(conf)
        server = service.Service.create(
            binary="nova-scheduler", topic=rpcapi.RPC_TOPIC, manager=MANAGER)
    except errors.SchedulerExtError as exc:
        # exit 2, one line: the command-line convention of every
        # scheduler-ext command for a usage or environment error
        logging.getLogger(__name__).critical("cannot start: %s", exc)
        print(f"scheduler-ext-nova-scheduler: cannot start: {exc}", file=sys.stderr)
        sys.exit(2)
    workers = conf.scheduler.workers or processutils.get_worker_count()
    try:                    # nova 2025.1+: executors must not cross a fork
        from nova import thread_pool_factory
        thread_pool_factory.reset_all_executors()
    except ImportError:
        pass
    service.serve(server, workers=workers)
    service.wait()


if __name__ == "__main__":
    main()
