"""Wake the reconcile when nova says a resize ended.

When the deployment emits nova's versioned notifications
(``[notifications] notification_format`` = ``versioned`` or ``both`` and an
``[oslo_messaging_notifications] driver``), the scheduler listens, in its
own listener pool (so other consumers of the topic still get every
message), for the events after which placement may over-hold:
``instance.resize_confirm.end``, ``instance.resize_revert.end`` and the
failures ``instance.resize.error``, ``instance.resize_prep.error`` and
``instance.resize_finish.error``. Each wakes the reconcile for that
instance at once; the migration poll still catches anything a lost
notification misses.
"""

from __future__ import annotations

from typing import Any

from oslo_log import log as logging
import oslo_messaging as messaging

from nova import rpc

from scheduler_ext.moves.tracker import ReconcileTracker

LOG = logging.getLogger(__name__)

#: the versioned notification event types that wake the reconcile
EVENTS = ("instance.resize_confirm.end", "instance.resize_revert.end",
          "instance.resize.error", "instance.resize_prep.error",
          "instance.resize_finish.error")
#: our listener pool on nova's versioned notification topics
POOL = "scheduler-ext-reconcile"


def instance_uuid(payload: Any) -> str | None:
    """The instance uuid of a versioned instance action payload."""
    try:
        return payload["nova_object.data"]["uuid"]
    except (KeyError, TypeError):
        return None


class ResizeEndedEndpoint:
    """oslo.messaging notification endpoint: wakes ``tracker``."""

    filter_rule = messaging.NotificationFilter(
        event_type="^(" + "|".join(e.replace(".", r"\.") for e in EVENTS) + ")$")

    def __init__(self, tracker: ReconcileTracker):
        self.tracker = tracker

    def _wake(self, event_type: str, payload: Any) -> None:
        uuid = instance_uuid(payload)
        if uuid:
            LOG.debug("%s for instance %s: reconcile it now", event_type, uuid)
            self.tracker.wake(uuid)

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self._wake(event_type, payload)

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        self._wake(event_type, payload)


def emitted(conf) -> bool:
    """Does this deployment emit nova's versioned notifications?"""
    drivers = [d for d in conf.oslo_messaging_notifications.driver
               if d and d != "noop"]
    return bool(drivers) and conf.notifications.notification_format in (
        "versioned", "both")


def start_listener(conf, tracker: ReconcileTracker):
    """The started notification listener, or None when the deployment
    emits no versioned notifications (the poll alone drives the
    reconcile)."""
    if not emitted(conf):
        LOG.info("nova emits no versioned notifications here: the "
                 "reconcile is driven by its migration poll alone")
        return None
    transport = rpc.NOTIFICATION_TRANSPORT      # None until nova's rpc.init
    if transport is None:
        return None
    targets = [messaging.Target(topic=topic) for topic in
               conf.notifications.versioned_notifications_topics]
    listener = messaging.get_notification_listener(
        transport, targets, [ResizeEndedEndpoint(tracker)],
        executor="threading", pool=POOL)
    listener.start()
    return listener
