"""What the scheduler manager runs beside nova's code: our options on
nova's configuration, the placement client over nova's own report client,
the ``NovaScheduler`` built as the service starts (its fleet view's full
read included; its engine weighing as nova's ``[filter_scheduler]`` says),
and the change-driven reconcile loop.

Everything a request needs is imported when this module is imported, and
the plugins named by the configuration are loaded when the service is
built (``ExtService``), so no request imports anything (numpy, the engine,
the driver) for the first time.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any, Callable

import numpy  # noqa: F401  (imported at start-up, never inside a request)
from oslo_log import log as logging

import nova.conf
from nova import context as nova_context
from nova.scheduler.client import report

from scheduler_ext import driver as se_driver
from scheduler_ext import errors
from scheduler_ext.conf import scheduler_ext as se_opts
from scheduler_ext.moves.reconcile import Reconciler
from scheduler_ext.moves.tracker import ReconcileTracker
from scheduler_ext.nova import placement_client, reconcile, weighing
from scheduler_ext.nova.scheduler import NovaScheduler
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.sources.fleet_view import checked_database

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)


def register_opts(conf=CONF) -> None:
    """Our ``[scheduler_ext]`` options on nova's configuration (nova
    registers ``[placement]`` itself)."""
    se_opts.register_opts(conf)


def preload(conf=CONF) -> None:
    """Import every plugin the configuration names (driver, engine and its
    fallback, move strategy): a bad name fails the service's start, and no
    request imports a module for the first time."""
    opts = conf.scheduler_ext
    se_driver.load_plugin(se_driver.DRIVER_NAMESPACE, opts.driver, "driver")
    se_driver.load_plugin(se_driver.SOURCE_NAMESPACE, opts.engine, "engine")
    se_driver.load_plugin(se_driver.SOURCE_NAMESPACE,
                          se_driver.FALLBACK_SOURCE, "engine")
    se_driver.load_plugin(se_driver.STRATEGY_NAMESPACE, opts.move_strategy,
                          "move_strategy")


def check_database(conf=CONF) -> None:
    """Read placement's database once when the fleet view will read it
    (``fleet_view.checked_database``): an unreachable one, or ``sql``
    without a URL, raises ``ConfigError`` naming the option. The service
    command runs this before it forks its workers, so a bad option stops
    the start once, not in every worker."""
    sql = checked_database(conf)
    if sql is not None:
        sql.dispose()           # no pooled connection crosses the fork


def nova_report_client() -> Any:
    """nova's process-wide ``SchedulerReportClient`` (the one nova's own
    scheduler uses; releases without ``report_client_singleton``, nova 23
    for one, get one built once from the same ``[placement]`` options)."""
    singleton = getattr(report, "report_client_singleton", None)
    if singleton is not None:
        return singleton()
    global _REPORT_CLIENT
    if _REPORT_CLIENT is None:
        _REPORT_CLIENT = report.SchedulerReportClient()
    return _REPORT_CLIENT


_REPORT_CLIENT: Any = None


_HEAP_FROZEN = False


def freeze_start_heap() -> None:
    """Collect, then move every object alive now out of the cyclic garbage
    collector's reach (``gc.freeze``); once per process (see the option
    ``[scheduler_ext] freeze_start_heap``)."""
    global _HEAP_FROZEN
    if _HEAP_FROZEN:
        return
    _HEAP_FROZEN = True
    started = time.monotonic()
    gc.collect()
    gc.freeze()
    LOG.info("froze the start-up heap: %d objects in %.2f s (full garbage "
             "collections no longer walk them)", gc.get_freeze_count(),
             time.monotonic() - started)


class ExtService:
    """scheduler-ext inside one nova scheduler process.

    ``report_client`` returns nova's ``SchedulerReportClient`` (default:
    ``nova_report_client``).
    """

    def __init__(self, host_manager,
                 report_client: Callable[[], Any] = nova_report_client):
        preload(CONF)
        self.host_manager = host_manager
        self._report_client = report_client
        self._lock = threading.Lock()
        self._client: HttpPlacement | None = None
        self._scheduler: NovaScheduler | None = None
        self.tracker = ReconcileTracker()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def client(self) -> HttpPlacement:
        """Our placement client over nova's report client."""
        with self._lock:
            if self._client is None:
                self._client = placement_client.from_report_client(
                    self._report_client())
            return self._client

    def start(self) -> None:
        """Build the scheduler as the service starts: the plugins' imports,
        the placement connection and the fleet view's full read happen here,
        not inside the first request. A configuration error (a bad option,
        an unreachable placement database) stops the start, naming the
        option; placement's API down only delays the build to the first
        request, as nova's own scheduler starts with placement down."""
        try:
            self.scheduler()
        except errors.ConfigError:
            raise
        except errors.SchedulerExtError as exc:
            LOG.error("scheduler-ext could not read the fleet at start (%s); "
                      "it is read again on the first request", exc)
        if CONF.scheduler_ext.freeze_start_heap:
            freeze_start_heap()

    @property
    def started(self) -> bool:
        """Whether the scheduler (and its fleet view) is built."""
        return self._scheduler is not None

    def scheduler(self) -> NovaScheduler:
        """The scheduler; built by ``start``, or on first use when placement
        was down at start."""
        client = self.client()
        with self._lock:
            if self._scheduler is None:
                self._scheduler = NovaScheduler(
                    se_driver.load_driver(client, CONF,
                                          weighing.from_nova_conf(CONF)),
                    self.host_manager, client)
            return self._scheduler

    # ---------------------------------------------------------- reconcile
    def reconcile_moves(self, context) -> dict[str, str]:
        """One change-driven reconcile run (``nova.reconcile.run``): the
        outcome per instance worked on."""
        return reconcile.run(context.elevated(), Reconciler(self.client()),
                             self.tracker)

    def start_reconcile(self) -> None:
        """Start the reconcile loop: a run every ``[scheduler_ext]
        reconcile_interval`` seconds, and at once when a notification
        wakes it (0 disables the loop)."""
        interval = CONF.scheduler_ext.reconcile_interval
        if interval <= 0:
            LOG.info("reconcile loop disabled ([scheduler_ext] "
                     "reconcile_interval = %s)", interval)
            return
        if self._thread is not None:
            return
        self._stop = threading.Event()      # one per loop: a restart is clean
        self._thread = threading.Thread(
            target=self._loop, args=(interval, self._stop),
            name="scheduler-ext-reconcile",
            daemon=True)
        self._thread.start()

    def stop_reconcile(self, timeout: float = 10.0) -> None:
        """Stop the loop (waits up to ``timeout`` seconds for a run in
        flight; 0: signal only)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        self.tracker.woken_event.set()
        if timeout:
            thread.join(timeout)

    def _loop(self, interval: float, stop: threading.Event) -> None:
        context = nova_context.get_admin_context()
        while not stop.is_set():
            try:
                self.reconcile_moves(context)
            except Exception:
                LOG.exception("reconcile run failed; next run in %s s",
                              interval)
            if not stop.is_set():
                self.tracker.woken_event.wait(interval)
