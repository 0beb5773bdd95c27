"""``[scheduler_ext]``: the driver, its move strategy and its engine."""

from __future__ import annotations

from oslo_config import cfg

GROUP = "scheduler_ext"

OPTS = [
    cfg.StrOpt(
        "driver", default="default",
        help="Name of the scheduler driver in the 'scheduler_ext.driver' "
             "entry-point namespace, loaded by the scheduler-ext nova "
             "scheduler service (scheduler-ext-nova-scheduler, nova 23 and "
             "later). It is built with (placement client, configuration) "
             "and answers select_destinations(ScheduleRequest). 'default' "
             "is scheduler-ext's driver: the engine and move strategy "
             "below, behind nova's request filters, host filters and "
             "weighers."),
    cfg.StrOpt(
        "engine", default="numpy",
        help="Name of the candidate engine in the 'scheduler_ext.engine' "
             "entry-point namespace. 'numpy' filters every provider's "
             "capacity in memory; for a fleet or query it cannot model "
             "exactly (nested providers) the driver asks placement "
             "instead. 'placement' always asks placement (GET "
             "/allocation_candidates) for the other hosts. With either, a "
             "moving server's old allocations count as free on its source "
             "host in the engine's view only: nothing is released in "
             "placement before the claim."),
    cfg.StrOpt(
        "snapshot_source", default="auto", choices=[
            ("auto", "sql when placement_database_connection is set, else "
                     "api"),
            ("api", "placement's REST API: before each decision one GET "
                    "/resource_providers (every provider's generation) and "
                    "four GETs per provider whose generation moved; a full "
                    "read costs four GETs per provider (about 10-60 ms "
                    "each), so it suits a few hundred providers"),
            ("sql", "placement's database, read-only, at "
                    "placement_database_connection: before each decision one "
                    "indexed query for the allocation rows written since the "
                    "last one, then a few queries for the providers they "
                    "touch; a full read is a few queries for the whole "
                    "fleet")],
        help="How the numpy engine reads the fleet. The service reads it "
             "whole once at start and logs the source, the time and the "
             "fleet size. Before each decision it re-reads what changed "
             "(every increase: placement bumps a provider's generation when "
             "allocations are added to it or its inventory, traits or "
             "aggregates change); decreases (allocations leaving a provider "
             "bump nothing) arrive from a background re-read every "
             "reread_interval seconds. If the database cannot be read later "
             "on, the view falls back to api with a warning."),
    cfg.FloatOpt(
        "refresh_interval", default=0.0, min=0.0,
        help="Seconds during which the engine's view is reused without "
             "asking placement what changed (0: ask before every scheduling "
             "request, the safe setting). The view is a cache: the "
             "providers a claim touches are re-read at once, and a stale row "
             "only costs a failed claim and the next candidate, or a host "
             "missed until the next read. With snapshot_source = sql the "
             "request-path read costs about a millisecond plus the "
             "providers changed since the last request, whatever the fleet "
             "size; with api, a GET /resource_providers (about 0.6 s at "
             "10,000 providers)."),
    cfg.FloatOpt(
        "host_state_refresh_interval", default=0.0, min=0.0,
        help="Seconds during which nova's host states are taken from the "
             "scheduler's mirror of the cells' compute node and service rows "
             "without asking the databases what changed (0: ask before every "
             "scheduling request, as nova's own host manager reads them, the "
             "safe setting). nova's schema indexes none of those rows' "
             "timestamps, so each ask scans both tables in the database: "
             "about 5 ms at 10,000 compute hosts and 50 ms at 100,000 on "
             "PostgreSQL, while Python reads only the changed rows. With 1, "
             "a service disabled or a compute node's report is seen up to a "
             "second later than nova's own scheduler sees it."),
    cfg.FloatOpt(
        "reread_interval", default=30.0, min=0.0,
        help="Seconds between the fleet view's background re-reads, which "
             "bring in decreases (deleted or moved allocations), providers "
             "added or deleted (sql) and any change the request-path read "
             "missed. They run in a thread of their own and never block a "
             "scheduling decision; one runs at a time, started when a "
             "decision has been answered, so that it runs between "
             "decisions rather than beside the one that found it due. With "
             "snapshot_source = api a re-read is one GET per provider. 0 "
             "disables them (the view then learns of decreases only from "
             "the providers our own claims and failures re-read)."),
    cfg.StrOpt(
        "placement_database_connection", secret=True,
        help="SQLAlchemy URL of placement's database (placement's own "
             "[placement_database]connection; a read-only account is "
             "enough). When set, snapshot_source = auto reads the fleet "
             "from it, and a move's migration consumer is read from it too "
             "(one statement instead of a GET through placement). The "
             "service checks it at start and refuses to start, naming this "
             "option and the database host, when it cannot be read."),
    cfg.IntOpt(
        "placement_results_limit", default=1000, min=1,
        help="Largest number of allocation candidates asked from placement "
             "when it is the candidate source (like nova's "
             "[scheduler]max_placement_results)."),
    cfg.IntOpt(
        "nova_host_limit", default=0, min=0,
        help="Largest number of hosts handed to nova's host filters and "
             "weighers per request, chosen by the engine's own weighing "
             "(free RAM, VCPU and disk with nova's [filter_scheduler] "
             "ram_weight_multiplier, cpu_weight_multiplier and "
             "disk_weight_multiplier), best first. 0 hands them as many as "
             "nova would get from placement "
             "([scheduler] max_placement_results, 1000 by default). Once the "
             "fleet view is cheap, nova's filters and weighers over 1000 "
             "hosts dominate a decision (they read every host's state from "
             "nova's database); 20 to 50 keeps their checks (service up, "
             "aggregates, server groups, image properties) at a fraction of "
             "the cost. Not applied when nova asks placement for every "
             "candidate (server groups, a host targeted without its node). "
             "The chosen host can differ from nova's full run when "
             "nova's weighers rank a host the engine did not hand over "
             "first; benchmarks/nova_e2e.py reports how often. With 0, a "
             "request whose filters and weighers all run on the host-state "
             "columns (nova's defaults; see the README) is ranked over every "
             "host that fits; a limit set here ranks every request on "
             "host-state objects."),
    cfg.StrOpt(
        "move_strategy", default="same_host",
        help="Name of the move strategy in the 'scheduler_ext.move_strategy' "
             "entry-point namespace. 'same_host' releases a moving server's "
             "old allocations from the capacity view before choosing, so a "
             "resize can stay on a full host (nova bug 1790204), and keeps "
             "every source allocation, sharing providers included, while a "
             "move to another host is in progress. 'stock' reproduces nova's "
             "own behaviour (the old allocations count against the source), "
             "for comparison."),
    cfg.BoolOpt(
        "prefer_same_host", default=False,
        help="When the source host and other hosts all fit a resize, pick "
             "the source host regardless of weights. A same-host resize "
             "copies no disk over the network and frees no capacity "
             "elsewhere; it also concentrates growth on hosts that already "
             "run the server. False leaves the choice to the weighers. Only "
             "used when the request allows the same host."),
    cfg.IntOpt(
        "max_claim_attempts", default=3, min=1, max=100,
        help="How many candidates the driver tries to claim, best first, "
             "before it gives up with NoValidHost. A claim fails when the "
             "capacity view was stale (another scheduler claimed first); "
             "each attempt is one placement write of 30-60 ms."),
    cfg.StrOpt(
        "allocation_ratio_storage", default="double",
        choices=[("double", "PostgreSQL or sqlite placement database"),
                 ("single", "MySQL/MariaDB: placement stores allocation_ratio "
                            "as a 4-byte FLOAT, so its candidate query sees "
                            "e.g. 0.7 as 0.69999999")],
        help="Precision of allocation_ratio in placement's database, so the "
             "engine filters exactly as placement's SQL does."),
    cfg.IntOpt(
        "reconcile_interval", default=3, min=0,
        help="Seconds between two polls of the reconcile loop in the "
             "scheduler service. Each poll reads the resize and "
             "cold-migration records that changed since the last complete "
             "run (one indexed query per cell) and brings those instances "
             "back to the move invariants: a confirmed, reverted or failed "
             "same-host resize is trimmed to what nova holds for it (the "
             "live flavor; the new one after a finish_resize failure), "
             "missing move "
             "allocations are restored, leftovers removed. nova's versioned "
             "notifications of a resize's end, when the deployment emits "
             "them, wake the loop at once. This bounds how long placement "
             "holds more than the live flavor. 0 disables the loop; "
             "'scheduler-ext audit' still works."),
    cfg.BoolOpt(
        "freeze_start_heap", default=True,
        help="Once the scheduler service has started (its fleet view read, "
             "nova's host manager built), move every object then alive out "
             "of the reach of Python's cyclic garbage collector "
             "(gc.freeze(), once per process). Those objects live as long as "
             "the service; without this, every full collection walks them "
             "again, and with 1000 hosts through nova's filters per request "
             "such collections take a fifth of a decision at 10,000 hosts. "
             "Objects frozen are still freed when nothing refers to them; "
             "only reference cycles among them are never collected."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list]]:
    return [(GROUP, OPTS)]
