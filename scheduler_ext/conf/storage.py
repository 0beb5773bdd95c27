"""``[storage]``: the storage-topology tools (``scheduler-ext storage``) and
the quorum-safe evacuation planner."""

from __future__ import annotations

from oslo_config import cfg

GROUP = "storage"

OPTS = [
    cfg.StrOpt(
        "instances_path", default="/var/lib/nova/instances",
        help="The instances path 'scheduler-ext storage discover' reports on "
             "when --path is not given; nova's [DEFAULT]instances_path on "
             "the compute host."),
    cfg.FloatOpt(
        "probe_timeout", default=10.0, min=0.1,
        help="Seconds each filesystem call on the instances path (stat, "
             "statfs, reading or writing the domain token) may take before "
             "the filesystem is reported hung. The call is abandoned, not "
             "killed: a hung network filesystem keeps it blocked in the "
             "kernel."),
    cfg.IntOpt(
        "reserved_disk_gb", default=0, min=0,
        help="GiB of each shared filesystem kept out of the sharing "
             "provider's DISK_GB inventory, on top of the filesystem's own "
             "root-only reserve (statfs free minus available)."),
    cfg.FloatOpt(
        "disk_allocation_ratio", default=1.0, min=0.0001,
        help="allocation_ratio of the sharing providers' DISK_GB inventory "
             "(like nova's disk_allocation_ratio; above 1.0 overcommits thin "
             "provisioned disks)."),
    cfg.FloatOpt(
        "size_tolerance", default=0.01, min=0.0, max=1.0,
        help="Largest relative difference between the filesystem sizes two "
             "hosts report for one storage domain (0.01 = 1%). A larger "
             "difference is a contradiction: sync refuses the reports."),
    cfg.FloatOpt(
        "brake_fraction", default=0.5, min=0.01, max=1.0,
        help="Mass-failure brake of the evacuation planner: when this "
             "fraction or more of one storage cluster's hosts is suspect at "
             "once (a 2|2 split at 0.5), it is treated as a storage incident "
             "(alert only: no fencing, no evacuation)."),
    cfg.ListOpt(
        "fence_ladder", default=["restart-agent", "graceful-reboot"],
        help="Actions taken on a suspect host, one more per "
             "fence_step_timeout while it stays suspect, in this order: "
             "log-only (alone: only log), restart-agent, graceful-reboot, "
             "hard-reboot. The reboots are fences; a host's instances are "
             "evacuated only after its fence is confirmed. The default "
             "never hard-reboots (like CloudStack, whose reboot on "
             "heartbeat timeout is off by default): a host a graceful "
             "reboot does not stop is left to the operator, who confirms "
             "the fence by forcing its compute service down."),
    cfg.FloatOpt(
        "fence_step_timeout", default=300.0, min=1.0,
        help="Seconds to wait for one ladder step to work (the host's "
             "heartbeat back, or its fence confirmed) before the next."),
    cfg.FloatOpt(
        "fence_timeout", default=600.0, min=1.0,
        help="Seconds a fence may stay unconfirmed (or deferred) before it "
             "is reported stuck with an alert. A stuck fence no longer "
             "holds a fence_batch slot, but its host still counts as down "
             "for the storage quorum."),
    cfg.IntOpt(
        "fence_batch", default=1, min=1,
        help="Fences in flight at once per storage cluster. A fence of a "
             "quorum member is never issued if it would leave fewer live "
             "quorum members than a strict majority."),
    cfg.IntOpt(
        "evacuation_batch", default=10, min=1,
        help="Evacuations started per storage cluster per planning tick."),
    cfg.IntOpt(
        "evacuation_attempts", default=3, min=1,
        help="Attempts to evacuate one server, the first included. An "
             "evacuation nova refuses, or after which the server is still "
             "on its fenced host with no task in progress (in ERROR after "
             "NoValidHost, say), is retried on a later tick, to another "
             "host when there is one; after this many it is alerted once "
             "and left for the operator."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list]]:
    return [(GROUP, OPTS)]
