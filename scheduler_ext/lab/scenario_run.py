"""Replay a checked scenario file (``scenario_file``) under one strategy,
with the same checks, tally and timeline as the random run."""

from __future__ import annotations

import random
import uuid as uuidlib
from typing import Callable

from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.lab import fleet
from scheduler_ext.lab.scenario_file import Scenario
from scheduler_ext.lab.simulation import FULL_CHECK_EVERY, Run
from scheduler_ext.lab.tally import Tally
from scheduler_ext.placement import SHARING_TRAIT, Inventory
from scheduler_ext.storage import fleet as storage_fleet

LOG = logging.getLogger(__name__)


def _uuid(rng: random.Random) -> str:
    return str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


class ScenarioRun(Run):
    """The scenario's fleet and servers on a fresh embedded placement; each
    ``step`` replays one event."""

    def __init__(self, scenario: Scenario, seed: int = 0,
                 full_check_every: int = FULL_CHECK_EVERY):
        super().__init__(None, seed, full_check_every)
        self.scenario = scenario
        rng = random.Random(seed)
        self.providers: dict[str, str] = {}     # name -> uuid
        disk_of: dict[str, str] = {}
        for s in scenario.sharing:
            agg = _uuid(rng)
            self.providers[s["name"]] = fleet.add_host(
                self.client, s["name"], {"DISK_GB": Inventory(s["disk_gb"])},
                (agg,), (SHARING_TRAIT,), uuid=_uuid(rng))
            disk_of[s["name"]] = agg
        self.disk: dict[str, str] = {}          # host uuid -> sharing uuid
        for h in scenario.hosts:
            invs = {rc: Inventory(**inv) for rc, inv in h["inventory"].items()}
            aggs = (disk_of[h["sharing"]],) if "sharing" in h else ()
            rp = fleet.add_host(self.client, h["name"], invs, aggs, uuid=_uuid(rng))
            self.providers[h["name"]] = rp
            if "sharing" in h and "DISK_GB" not in invs:
                self.disk[rp] = self.providers[h["sharing"]]
        self.servers: dict[str, str] = {}       # name -> uuid
        if scenario.reports:
            self._storage_from_reports()
        for s in scenario.servers:
            self._place(s)

    def _storage_from_reports(self) -> None:
        """One sharing provider per storage domain of the hosts' reports,
        as ``scheduler-ext storage sync`` builds it; hosts without DISK_GB
        inventory take their disk from it."""
        built = storage_fleet.storage(self.client, self.scenario.reports)
        for warning in built.warnings:
            LOG.warning("storage reports: %s", warning)
        for sharing, members in built.members.items():
            for host in members:
                rp = self.providers[host]
                _, invs = self.client.get_inventories(rp)
                if "DISK_GB" not in invs:
                    self.disk[rp] = sharing

    def _place(self, s: dict) -> None:
        flavor = self.scenario.flavors[s["flavor"]]
        host = self.providers[s["host"]]
        allocs: dict[str, dict[str, int]] = {}
        for rc, n in flavor.items():
            rp = self.disk.get(host, host) if rc == "DISK_GB" else host
            allocs.setdefault(rp, {})[rc] = n
        try:
            server = self.model.place(flavor, allocs, host)
        except errors.Conflict as exc:
            self.tally.counts["servers that did not fit at the start"] += 1
            self.tally.violation(f"start: server {s['name']} does not fit on "
                                 f"{s['host']}: {exc.detail}")
            return
        self.servers[s["name"]] = server.uuid

    def step(self, step: int) -> None:
        event = self.scenario.events[step]
        op, name = event["op"], str(event.get("server", ""))
        if op == "reconcile":
            self.reconcile_dirty()
            self.after(step, op, self.reconciled, self.exact)
            return
        flavor = self.scenario.flavors.get(event.get("flavor", ""), {})
        if op == "boot":
            server = self.attempt("boot", self.model.boot, flavor)
            acted = [server.uuid] if server is not None else []
            if server is not None:
                self.servers[name] = server.uuid
            self.after(step, op, acted, False)
            return
        uuid = self.servers.get(name, "")
        if uuid not in self.model.servers:
            self.tally.counts[f"{op} skipped (no such server)"] += 1
            self.after(step, op, [], False)
            return
        self._move(op, uuid, flavor)
        if op != "delete":
            self.dirty.add(uuid)
        self.after(step, op, [uuid], False)

    def _move(self, op: str, uuid: str, flavor: dict[str, int]) -> None:
        model, counts = self.model, self.tally.counts
        active = model.servers[uuid].active
        if op in ("resize", "migrate"):
            if active:
                counts[f"{op} skipped (move in progress)"] += 1
                return
            move = (self.attempt("resize", model.resize, uuid, flavor)
                    if op == "resize" else self.attempt("migrate", model.migrate, uuid))
            if op == "resize" and move is not None and move.source == move.dest:
                counts["resize same host ok"] += 1
        elif op in ("confirm", "revert", "fail"):
            if not active:
                counts[f"{op} skipped (no move in progress)"] += 1
            elif op == "fail":
                counts["reschedule " + ("ok" if model.fail_on_destination(uuid)
                                        else "failed")] += 1
            else:
                (model.confirm if op == "confirm" else model.revert)(uuid)
                counts[op + " ok"] += 1
        elif op == "delete":
            model.delete(uuid)
            counts["delete ok"] += 1


def run_scenario(scenario: Scenario, strategy: str,
                 full_check_every: int = FULL_CHECK_EVERY,
                 progress: Callable[[int], None] | None = None) -> Tally:
    """Replay ``scenario`` under ``strategy``; the tally."""
    run = ScenarioRun(scenario, full_check_every=full_check_every)
    run.use_strategy(strategy)
    return run.run(len(scenario.events), progress)
