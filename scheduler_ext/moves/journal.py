"""The release journal: a real release is recorded before it is written.

Only queries the engine cannot model need a real release (placement
itself is asked for the source host's candidates, with the old allocations
really freed). Placement cannot hold that intent: anything it holds for a
consumer counts against the very capacity the release frees. So the intent
goes to a small file per move, written (and fsynced) before the release,
removed once the claim or the restore is written:

* the process dies after the release: the file stays; ``recover`` (run by
  a restarted scheduler's reconcile, and by every reconcile run for files
  older than ``STALE`` seconds) finds the instance and the migration still
  holding nothing, as the release left them, and writes back what they
  held, in one write guarded by their generations;
* anything wrote those consumers since (our claim, nova's conductor): the
  release was superseded; the file is dropped.

The file is JSON: the instance, the migration, what each held (the exact
providers, sharing ones included), project and user, the writer's pid and
the time (``time.time()`` seconds).
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
import time
from typing import Any

from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.moves.consumers import INSTANCE, MIGRATION, Held
from scheduler_ext.placement import AllocationWrite, PlacementClient, allocations

LOG = logging.getLogger(__name__)

#: seconds after which another process's entry is no longer in flight
STALE = 120.0


class ReleaseJournal:
    """Release intents in ``directory`` (created on first use)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = pathlib.Path(directory)
        #: migrations this process has in flight (never recovered here)
        self.in_flight: set[str] = set()

    def _path(self, migration_uuid: str) -> pathlib.Path:
        return self.directory / f"{migration_uuid}.json"

    def record(self, held: Held, project_id: str, user_id: str) -> None:
        """Write the intent of releasing what ``held`` holds (atomically:
        a temporary file, fsync, rename). Raises SchedulerExtError naming
        the directory when it cannot be written: then no release is made."""
        entry = {"instance": held.instance_uuid,
                 "migration": held.migration_uuid,
                 "held": {consumer: allocations.copy(c.allocations)
                          for consumer, _, c in held.consumers()},
                 "project_id": project_id, "user_id": user_id,
                 "pid": os.getpid(), "time": time.time()}
        assert held.migration_uuid is not None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "w") as out:
                json.dump(entry, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self._path(held.migration_uuid))
        except OSError as exc:
            raise errors.SchedulerExtError(
                f"release journal {self.directory}: cannot record the "
                f"release of migration {held.migration_uuid}: {exc}") from exc
        self.in_flight.add(held.migration_uuid)

    def clear(self, migration_uuid: str) -> None:
        """The claim or the restore is written: forget the intent."""
        self.in_flight.discard(migration_uuid)
        try:
            self._path(migration_uuid).unlink()
        except FileNotFoundError:
            pass

    def entries(self) -> list[dict[str, Any]]:
        """Every recorded intent (unreadable files are logged and skipped)."""
        out = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError) as exc:
                LOG.error("release journal entry %s unreadable: %s", path, exc)
        return out

    def recover(self, client: PlacementClient,
                stale: float = STALE) -> list[str]:
        """Restore what dead or stuck releases left released (module
        docstring); returns the migrations restored. Entries of this
        process's moves in flight, and of other processes younger than
        ``stale`` seconds, are left alone. Never raises for placement
        errors: the entry stays for the next run."""
        restored: list[str] = []
        if not self.directory.exists():
            return restored
        for entry in self.entries():
            mig = entry["migration"]
            if mig in self.in_flight or (entry["pid"] != os.getpid() and
                                         time.time() - entry["time"] < stale):
                continue
            try:
                if _restore_entry(client, entry):
                    restored.append(mig)
                self.clear(mig)
            except errors.SchedulerExtError as exc:
                LOG.error("release journal: migration %s not restored yet: %s",
                          mig, exc)
        return restored


def _restore_entry(client: PlacementClient, entry: dict[str, Any]) -> bool:
    """Write the entry's allocations back if its consumers still hold
    nothing; False when they were written since (superseded)."""
    now = {c: client.get_consumer(c) for c in entry["held"]}
    if any(c.allocations for c in now.values()):
        return False
    writes = {c: AllocationWrite(allocs, entry["project_id"], entry["user_id"],
                                 now[c].generation,
                                 INSTANCE if c == entry["instance"] else MIGRATION)
              for c, allocs in entry["held"].items() if allocs}
    if writes:
        client.post_allocations(writes)
        LOG.warning("release journal: restored %s, released by a scheduler "
                    "that stopped before claiming", writes and sorted(writes))
    return bool(writes)
