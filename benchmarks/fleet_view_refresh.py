"""The fleet view's request-path cost on a real placement (sqlite or
PostgreSQL), per fleet size: full read at start, refresh with nothing
changed, refresh after 100 providers received claims, background re-read,
memory. See ``scheduler_ext.lab.bench_refresh``.

    .venv/bin/python benchmarks/fleet_view_refresh.py --database postgresql --sizes 10000,100000
"""

from __future__ import annotations

import json
import sys

from scheduler_ext.cmd import common
from scheduler_ext.lab import bench_refresh


def main(argv: list[str] | None = None) -> int:
    """Every flag is checked before any service starts (one line, exit 2)."""
    parser = common.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--sizes", type=common.count_list(100), default="10000,100000",
                        help="providers per run, comma-separated, each >= 100")
    parser.add_argument("--changed", type=common.count(1), default=100,
                        help="providers given claims between two refreshes")
    parser.add_argument("--rounds", type=common.count(1), default=5)
    parser.add_argument("--json", action="store_true", help="also print JSON lines")
    args = parser.parse_args(argv)
    if args.changed > min(args.sizes):
        parser.error(f"--changed: {args.changed} providers in a fleet of "
                     f"{min(args.sizes)} (--sizes)")
    for n in args.sizes:
        r = bench_refresh.refresh_cost(n, args.database, args.changed, args.rounds)
        print(bench_refresh.format_row(r), flush=True)
        if args.json:
            print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
