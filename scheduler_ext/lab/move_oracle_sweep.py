"""The move oracle's long sweep: seeded random flows (``move_oracle``),
each run with stock and with ours, tallied per flow (move x failure or
restart point x end) and fleet shape.

    python -m scheduler_ext.lab.move_oracle_sweep --flows 5000
    python -m scheduler_ext.lab.move_oracle_sweep --flows 300 --postgres

The engine is drawn per flow (``numpy`` or ``placement``, whose
candidates the embedded placement gets from the reference:
``reference_placement``), and a flavor may forbid a trait. ``--postgres``
runs them on a real placement 16.0.0 on a throw-away PostgreSQL. Prints the tables (``VIEWS``: per row
its generated cases, its differences from stock, per KNOWN_OPEN family,
the restart points reached, stock's own held-once breaks that ours'
end state shares (``move_oracle.STOCK_BREAKS``) and placement's own
failures) and every flow
of family NEW; exit status 1 when there is one.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import random
import signal
import sys
import time
from typing import Callable, Iterator

from scheduler_ext import errors
from scheduler_ext.lab import move_oracle
from scheduler_ext.lab.reference_placement import ReferencePlacement
from scheduler_ext.placement import PlacementClient


def empty(client: PlacementClient) -> PlacementClient:
    """``client`` with every allocation and provider deleted."""
    providers = client.list_providers()
    for prov in providers:
        for consumer in client.get_provider_allocations(prov.uuid):
            client.delete_allocations(consumer)
    for prov in sorted(providers, key=lambda p: p.parent_provider_uuid is None):
        client.delete_provider(prov.uuid)
    return client


#: the tables a reset keeps: what placement fills as it starts (standard
#: traits, resource classes, consumer types) and caches in its processes
KEPT_TABLES = frozenset({"traits", "resource_classes", "consumer_types",
                         "alembic_version"})


def reset_database(url: str) -> None:
    """Empty placement's PostgreSQL database at ``url`` with its ids
    restarted: placement orders equal candidates (two identical pGPUs, two
    sharing providers) by provider id, so the two runs of a flow must see
    the same ids for stock to be able to follow ours' choices."""
    import sqlalchemy as sa
    engine = sa.create_engine(url)
    try:
        tables = [t for t in sa.inspect(engine).get_table_names()
                  if t not in KEPT_TABLES]
        with engine.begin() as conn:
            conn.execute(sa.text(f"TRUNCATE {', '.join(tables)} "
                                 "RESTART IDENTITY CASCADE"))
    finally:
        engine.dispose()


@contextlib.contextmanager
def postgres_placement() -> Iterator[Callable[[], PlacementClient]]:
    """A real placement on PostgreSQL; yields a factory of a client of it,
    its database emptied with its ids restarted (``reset_database``)."""
    from scheduler_ext.lab.placement_server import LocalPlacement
    from scheduler_ext.lab.postgres import LocalPostgres
    from scheduler_ext.placement.http import HttpPlacement
    server = LocalPlacement()
    with LocalPostgres() as db:
        server.database_url = db
        with server as url:
            def fresh() -> PlacementClient:
                reset_database(db)
                return HttpPlacement.from_url(url)
            yield fresh


#: the sweep's tables: name -> the row of a flow
VIEWS: dict[str, Callable[[move_oracle.Flow], str]] = {
    "flow x failure/restart point x fleet shape":
        lambda f: f"{f.label:64} {f.shape.label}",
    "move x failure point (all restart points and shapes)":
        lambda f: " ".join([f.move] + [f"prep_resize x{f.prep_failures}"] * bool(f.prep_failures)
                           + [f.failure] * bool(f.failure)),
    "restart point (the scheduler or ours' reconcile dies at its write)":
        lambda f: f.kill_point or "(none)",
    "fleet shape": lambda f: f.shape.label,
}


def sweep(flows: int, seed: int, new_client: Callable[[], PlacementClient],
          engines: tuple[str, ...] = ("numpy",),
          show: frozenset[str] = frozenset({"NEW"})) -> tuple[dict, list]:
    """``flows`` random flows; returns ({view: {row: Counter(cases=...,
    <family>=..., restart reached=...)}}, [(family, flow, differences) of
    the families in ``show``])."""
    rng = random.Random(seed)
    tables: dict[str, dict[str, collections.Counter]] = {
        v: collections.defaultdict(collections.Counter) for v in VIEWS}
    new = []
    failed: dict[str, move_oracle.Flow] = {}
    for _ in range(flows):
        flow = move_oracle.random_flow(rng, engines)
        tally: collections.Counter = collections.Counter(cases=1)
        try:
            diffs, stock, ours = move_oracle.compare(flow, new_client)
        except errors.PlacementUnavailable as exc:
            # placement itself failed (a 500): no end state to compare
            tally["placement 500"] += 1
            failed.setdefault(str(exc)[:300], flow)
        else:
            tally["restart reached"] += bool(ours.killed)
            tally["stock breaks"] += bool(move_oracle.stock_breaks(stock, ours))
            fam = move_oracle.family(stock, ours, diffs)
            if fam:
                tally[fam] += 1
            if fam in show:
                new.append((fam, flow, diffs))
        for view, row_of in VIEWS.items():
            tables[view][row_of(flow)].update(tally)
    for message, flow in failed.items():
        print(f"placement failed: {message}\n  first in {flow}", file=sys.stderr)
    return tables, new


#: the columns that count no difference: cases; flows whose scheduler or
#: reconcile died at its kill point; flows where stock's own end state
#: breaks the held-once rule and ours' ends the same (``STOCK_BREAKS``);
#: flows placement itself failed
NOT_DIFFERENCES = ("cases", "restart reached", "stock breaks", "placement 500")


def print_tables(tables: dict, out=sys.stdout) -> None:
    """Each view: per row, its cases, differences (all families), then
    per family; restart points reached; placement's own failures."""
    fams = sorted({k for t in tables.values() for row in t.values() for k in row}
                  - set(NOT_DIFFERENCES))
    for view, table in tables.items():
        width = max([len(view)] + [len(r) for r in table])
        head = ["cases", "differences"] + fams + list(NOT_DIFFERENCES[1:])
        print(f"\n{view:{width}} " + " ".join(f"{h:>9}" for h in head), file=out)
        total: collections.Counter = collections.Counter()
        for row, counts in sorted(table.items()):
            total.update(counts)
            print(_line(row, width, counts, fams), file=out)
        print(_line("total", width, total, fams), file=out)


def _line(row: str, width: int, counts: collections.Counter, fams: list[str]) -> str:
    diffs = sum(counts[f] for f in fams)
    cells = [counts["cases"], diffs] + [counts[f] for f in fams] + \
        [counts[k] for k in NOT_DIFFERENCES[1:]]
    return f"{row:{width}} " + " ".join(f"{c:>9}" for c in cells)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--postgres", action="store_true",
                    help="a real placement on PostgreSQL (else the embedded one)")
    ap.add_argument("--show", action="append", default=["NEW"], metavar="FAMILY",
                    help="also print the flows of this family (NEW always)")
    args = ap.parse_args(argv)
    # SIGTERM as Ctrl-C: the placement and PostgreSQL started are stopped
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    show = frozenset(args.show)
    logging.disable(logging.CRITICAL)
    started = time.monotonic()
    if args.postgres:
        with postgres_placement() as factory:
            tables, shown = sweep(args.flows, args.seed, factory,
                                  ("numpy", "placement"), show)
    else:
        tables, shown = sweep(args.flows, args.seed, ReferencePlacement,
                              ("numpy", "placement"), show)
    print_tables(tables)
    print(f"{time.monotonic() - started:.0f} s")
    for fam, flow, diffs in shown:
        print(f"{fam}: {flow}\n  " + "\n  ".join(map(str, diffs)))
    return 1 if any(fam == "NEW" for fam, _, _ in shown) else 0


if __name__ == "__main__":
    sys.exit(main())
