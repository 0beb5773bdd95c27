"""Rounds of concurrent claims on one provider through scheduler-ext's own
HTTP client, against a placement on PostgreSQL (helper of the overcommit
tests).

Each round releases ``concurrency`` threads together; each claims 1 VCPU
for a new consumer with ``HttpPlacement.put_allocations`` (so with the
client's re-sends after 409 placement.concurrent_update), then the usage is
read back and the round's allocations deleted.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import threading
import uuid

from scheduler_ext import errors
from scheduler_ext.lab.placement_server import LocalPlacement
from scheduler_ext.lab.postgres import LocalPostgres
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.http import HttpPlacement

#: what placement 16.0.0 logs when its over-capacity exemption admits a write
EXEMPTION_LOG = "reduces existing overage"


@dataclasses.dataclass
class Round:
    accepted: int = 0
    over_capacity: int = 0      # 409 "Unable to allocate inventory"
    gave_up: int = 0            # 409 concurrent_update after every re-send
    resends: int = 0            # the client's re-sends, summed
    used: int = 0               # the provider's VCPU usage afterwards


@contextlib.contextmanager
def placement_on_postgres(**placement_kwargs):
    """A throw-away PostgreSQL and a LocalPlacement on it; yields the
    started LocalPlacement."""
    server = LocalPlacement(**placement_kwargs)   # validated before starting
    with LocalPostgres() as db:
        server.database_url = db
        with server:
            yield server


def _claim(client: HttpPlacement, rp: str, start: threading.Barrier,
           outcome: Round, lock: threading.Lock) -> None:
    sent_before = client.retried_writes
    start.wait()
    try:
        client.put_allocations(str(uuid.uuid4()), AllocationWrite(
            {rp: {"VCPU": 1}}, "race", "race", None))
        field = "accepted"
    except errors.CapacityExceeded:
        field = "over_capacity"
    except errors.ConcurrentUpdate:
        field = "gave_up"
    with lock:
        setattr(outcome, field, getattr(outcome, field) + 1)
        outcome.resends += client.retried_writes - sent_before


def race_rounds(url: str, *, rounds: int, concurrency: int = 16,
                capacity: int = 8, stop_at_overcommit: bool = False
                ) -> list[Round]:
    """Up to ``rounds`` rounds on a new provider of ``capacity`` VCPU;
    with ``stop_at_overcommit`` it stops after the first round whose
    usage exceeds the capacity, and leaves that round's allocations in
    place."""
    admin = HttpPlacement.from_url(url, timeout=300)
    prov = admin.create_provider(f"race-{uuid.uuid4()}")
    admin.set_inventories(prov.uuid, prov.generation,
                          {"VCPU": Inventory(capacity)})
    clients = [HttpPlacement.from_url(url, timeout=300)
               for _ in range(concurrency)]
    for client in clients:
        client.microversion     # negotiated now, not during the race
    done: list[Round] = []
    lock = threading.Lock()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        for _ in range(rounds):
            outcome, start = Round(), threading.Barrier(concurrency)
            for f in [pool.submit(_claim, c, prov.uuid, start, outcome, lock)
                      for c in clients]:
                f.result()
            outcome.used = admin.get_usages(prov.uuid).get("VCPU", 0)
            done.append(outcome)
            if stop_at_overcommit and outcome.used > capacity:
                break
            for consumer in admin.get_provider_allocations(prov.uuid):
                admin.delete_allocations(consumer)
    return done
