"""What the scheduler manager (nova >= 23) and the scheduler driver
(nova <= 22) share: our options on nova's configuration, the placement
client, the ``NovaScheduler`` built on first use, and the periodic
reconcile with its look-back bookkeeping."""

from __future__ import annotations

import threading

from oslo_log import log as logging

import nova.conf

from scheduler_ext import errors
from scheduler_ext.conf import scheduler_ext as se_opts
from scheduler_ext.driver import load_driver
from scheduler_ext.moves.reconcile import Fix
from scheduler_ext.nova import reconcile
from scheduler_ext.nova.scheduler import NovaScheduler
from scheduler_ext.placement.http import HttpPlacement

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)


def register_opts(conf=CONF) -> None:
    """Our ``[scheduler_ext]`` options on nova's configuration (nova
    registers ``[placement]`` itself)."""
    se_opts.register_opts(conf)


def placement_client(conf=CONF) -> HttpPlacement:
    """A placement client from nova.conf's ``[placement]`` section (the
    keystoneauth1 auth, session and adapter options nova itself uses)."""
    if conf.scheduler_ext.placement_backend != "http":
        raise errors.ConfigError(
            "[scheduler_ext] placement_backend must be 'http' in a nova "
            "deployment: the embedded placement is for simulations only",
            option="placement_backend",
            value=conf.scheduler_ext.placement_backend)
    return HttpPlacement.from_conf(conf, "placement")


class ExtService:
    """scheduler-ext inside one nova scheduler process."""

    def __init__(self, host_manager):
        self.host_manager = host_manager
        self._lock = threading.Lock()
        self._scheduler: NovaScheduler | None = None
        #: start of the last completed reconcile run (None: none yet)
        self.reconciled_until = None

    def scheduler(self) -> NovaScheduler:
        """Built on first use, so a service starting while placement is
        down comes up (nova's own manager does the same)."""
        with self._lock:
            if self._scheduler is None:
                client = placement_client(CONF)
                self._scheduler = NovaScheduler(
                    load_driver(client, CONF), self.host_manager, client)
            return self._scheduler

    def reconcile_moves(self, context) -> list[Fix]:
        """One reconcile run over the instances whose moves changed since
        the last run; returns the fixes (applied or not, see
        ``nova.reconcile.reconcile``)."""
        started = reconcile.utcnow()
        since = reconcile.reconcile_since(started, self.reconciled_until)
        client = self.scheduler().client
        states = reconcile.moved_instance_states(context.elevated(), since)
        fixes = reconcile.reconcile(client, states)
        self.reconciled_until = started
        if fixes:
            LOG.info("reconcile: %d of %d recently moved instances needed a "
                     "fix, %d applied", len(fixes), len(states),
                     sum(f.applied for f in fixes))
        return fixes
