"""The sql change source on MariaDB, against placement's own answers.

CI's machine has no MySQL or MariaDB server, so the tests run the sql
source on sqlite and the end-to-end benchmark on PostgreSQL. This check
covers the third database placement supports: a scratch MariaDB server and
placement (gunicorn on 127.0.0.1) on it, a small fleet, then rounds of
allocations written and deleted through placement's API, each followed by
one poll of ``SqlChanges``. After every poll the view's usage of each
provider written in the round must equal placement's
``GET /resource_providers/{uuid}/usages`` (a recent row deleted is in the
tail, so its decrease is seen at once too); after the last round a
re-read must equal placement for every provider.

    .venv/bin/python benchmarks/sql_source_mariadb.py --rounds 50

Needs mariadb-server (``mariadb-install-db``, ``mariadbd``) and PyMySQL.
Exit status 0 when every compare held, 1 otherwise (each difference is
printed), 2 for a bad flag.
"""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import sys
import uuid as uuidlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from placement_race import LocalMariaDB  # noqa: E402

from scheduler_ext.cmd import common  # noqa: E402
from scheduler_ext.engine.index import CapacityIndex  # noqa: E402
from scheduler_ext.lab.placement_db import load_placement_db  # noqa: E402
from scheduler_ext.lab.placement_server import LocalPlacement  # noqa: E402
from scheduler_ext.lab.synthetic import bench_fleet  # noqa: E402
from scheduler_ext.placement import AllocationWrite  # noqa: E402
from scheduler_ext.placement.http import HttpPlacement  # noqa: E402
from scheduler_ext.placement.sql_snapshot import SqlSnapshot  # noqa: E402
from scheduler_ext.sources.sql_changes import SqlChanges  # noqa: E402


def differences(index: CapacityIndex, client: HttpPlacement, uuids) -> list[str]:
    """Providers of ``uuids`` whose usage in ``index`` is not placement's."""
    out = []
    for u in sorted(set(uuids)):
        theirs = {rc: n for rc, n in client.get_usages(u).items() if n}
        ours = {rc: n for rc, n in index.usage(u).items() if n}
        if ours != theirs:
            out.append(f"{u}: view {ours}, placement {theirs}")
    return out


def run(args) -> int:
    fleet = bench_fleet(args.providers, args.seed)
    hosts = [fleet.uuids[r] for r in range(len(fleet))
             if "MISC_SHARES_VIA_AGGREGATE" not in fleet.trait_sets[fleet.trait_set_of[r]]]
    rng = random.Random(args.seed)
    wrong: list[str] = []
    with LocalMariaDB() as db_url, LocalPlacement(database_url=db_url) as url:
        load_placement_db(db_url, fleet)
        client = HttpPlacement.from_url(url, timeout=60)
        sql = SqlSnapshot(db_url)
        sql.check()
        source = SqlChanges(sql)
        index = CapacityIndex.from_snapshot(source.full_read())
        mine: list[tuple[str, str]] = []
        for _ in range(args.rounds):
            written = []
            for _ in range(args.writes):
                if mine and rng.random() < 0.4:
                    consumer, host = mine.pop(rng.randrange(len(mine)))
                    client.delete_allocations(consumer)
                else:
                    consumer, host = str(uuidlib.uuid4()), rng.choice(hosts)
                    client.put_allocations(consumer, AllocationWrite(
                        {host: {"VCPU": 1, "MEMORY_MB": 256}},
                        "check", "check", None))
                    mine.append((consumer, host))
                written.append(host)
            source.poll(index).apply_to(index)
            wrong += differences(index, client, written)
        source.reread(index).apply_to(index)
        wrong += differences(index, client, hosts)
        print(f"MariaDB: {args.rounds} rounds of {args.writes} writes, "
              f"{source.rows_read} allocation rows read by the polls, "
              f"{len(wrong)} differences from placement")
    for line in wrong:
        print(f"  {line}")
    return 1 if wrong else 0


def main(argv: list[str] | None = None) -> int:
    parser = common.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--providers", type=common.count(20), default=200)
    parser.add_argument("--rounds", type=common.count(1), default=50)
    parser.add_argument("--writes", type=common.count(1), default=4,
                        help="allocation writes and deletes per round")
    parser.add_argument("--seed", type=common.count(0), default=0)
    args = parser.parse_args(argv)
    missing = [tool for tool in ("mariadb-install-db", "mariadbd")
               if shutil.which(tool) is None]
    if importlib.util.find_spec("pymysql") is None:
        missing.append("PyMySQL (pip install pymysql)")
    if missing:
        parser.error(f"needs MariaDB's server and PyMySQL; missing: {', '.join(missing)}")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
