"""What the evacuation planner reads and says: the hosts of the storage
clusters, the servers on them, and the actions of a tick."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ClusterHost:
    name: str
    cluster: str
    quorum: bool = True
    domains: frozenset[str] = frozenset()
    capacity: int | None = None       # instances it can take; None: no limit
    #: its compute node offers DISK_GB of its own: a named-host evacuation
    #: of a server whose disk is on a sharing provider can land there
    node_disk: bool = True
    #: nova's scheduler may choose it (compute service up and enabled)
    schedulable: bool = True


@dataclasses.dataclass(frozen=True)
class Instance:
    uuid: str
    host: str
    domain: str | None = None         # storage domain of its disks, if shared
    status: str = "ACTIVE"            # nova's server status
    busy: bool = False                # a task in progress (nova's task_state)
    sharing_disk: bool = False        # its DISK_GB is on a sharing provider


@dataclasses.dataclass(frozen=True)
class Action:
    """``kind``: log, alert, restart-agent, graceful-reboot, hard-reboot,
    evacuate (``instance`` to ``destination``; None: nova's scheduler
    chooses) or evacuation-failed (one failed attempt, to be retried)."""

    at: float
    kind: str
    host: str
    reason: str = ""
    instance: str | None = None
    destination: str | None = None


def majority(members: int) -> int:
    return members // 2 + 1
