"""The move oracle's long sweep: seeded random flows (``move_oracle``),
each run with stock and with ours, tallied per flow (move x failure or
restart point x end) and fleet shape.

    python -m scheduler_ext.lab.move_oracle_sweep --flows 5000
    python -m scheduler_ext.lab.move_oracle_sweep --flows 300 --postgres

``--postgres`` runs them on a real placement 16.0.0 on a throw-away
PostgreSQL (the engine then is ``numpy`` or ``placement``, drawn per
flow). Prints the table (cases, then differences per KNOWN_OPEN family)
and every flow of family NEW; exit status 1 when there is one.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import random
import sys
import time
from typing import Callable, Iterator

from scheduler_ext.lab import move_oracle
from scheduler_ext.placement import EmbeddedPlacement, PlacementClient


def empty(client: PlacementClient) -> PlacementClient:
    """``client`` with every allocation and provider deleted."""
    providers = client.list_providers()
    for prov in providers:
        for consumer in client.get_provider_allocations(prov.uuid):
            client.delete_allocations(consumer)
    for prov in sorted(providers, key=lambda p: p.parent_provider_uuid is None):
        client.delete_provider(prov.uuid)
    return client


@contextlib.contextmanager
def postgres_placement() -> Iterator[Callable[[], PlacementClient]]:
    """A real placement on PostgreSQL; yields a factory of an emptied
    client of it."""
    from scheduler_ext.lab.placement_server import LocalPlacement
    from scheduler_ext.lab.postgres import LocalPostgres
    from scheduler_ext.placement.http import HttpPlacement
    server = LocalPlacement()
    with LocalPostgres() as db:
        server.database_url = db
        with server as url:
            yield lambda: empty(HttpPlacement.from_url(url))


def sweep(flows: int, seed: int, new_client: Callable[[], PlacementClient],
          engines: tuple[str, ...] = ("numpy",)) -> tuple[dict, list]:
    """``flows`` random flows; returns ({(flow label, shape label):
    Counter(cases=..., <family>=...)}, [(flow, differences) of NEW])."""
    rng = random.Random(seed)
    table: dict[tuple[str, str], collections.Counter] = collections.defaultdict(
        collections.Counter)
    new = []
    for _ in range(flows):
        flow = move_oracle.random_flow(rng, engines)
        diffs, stock, ours = move_oracle.compare(flow, new_client)
        row = table[(flow.label, flow.shape.label)]
        row["cases"] += 1
        fam = move_oracle.family(stock, ours, diffs)
        if fam:
            row[fam] += 1
        if fam == "NEW":
            new.append((flow, diffs))
    return table, new


def print_table(table: dict, out=sys.stdout) -> None:
    fams = sorted({k for row in table.values() for k in row} - {"cases"})
    rows = sorted(table.items())
    by_flow: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for (flow, _), row in rows:
        by_flow[flow].update(row)
    head = ["cases", "differences"] + fams
    print(f"{'flow x failure/restart point':58} {'fleet shape':26} "
          + " ".join(f"{h:>11}" for h in head), file=out)
    for (flow, shape), row in rows:
        diffs = sum(row[f] for f in fams)
        print(f"{flow:58} {shape:26} {row['cases']:>11} {diffs:>11} "
              + " ".join(f"{row[f]:>11}" for f in fams), file=out)
    print("\nper flow (all shapes):", file=out)
    for flow, row in sorted(by_flow.items()):
        diffs = sum(row[f] for f in fams)
        print(f"{flow:58} {row['cases']:>6} cases {diffs:>4} differences "
              + " ".join(f"{f}={row[f]}" for f in fams if row[f]), file=out)
    total: collections.Counter = collections.Counter()
    for row in table.values():
        total.update(row)
    print(f"\ntotal: {total['cases']} flows, "
          + ", ".join(f"{f}: {total[f]}" for f in fams), file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--postgres", action="store_true",
                    help="a real placement on PostgreSQL (else the embedded one)")
    args = ap.parse_args(argv)
    logging.disable(logging.CRITICAL)
    started = time.monotonic()
    if args.postgres:
        with postgres_placement() as factory:
            table, new = sweep(args.flows, args.seed, factory, ("numpy", "placement"))
    else:
        table, new = sweep(args.flows, args.seed, EmbeddedPlacement)
    print_table(table)
    print(f"{time.monotonic() - started:.0f} s")
    for flow, diffs in new:
        print(f"NEW: {flow}\n  " + "\n  ".join(map(str, diffs)))
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
