"""Reproduce placement's own overcommit under concurrent claims.

openstack-placement on PostgreSQL with several WSGI workers; one provider
with VCPU 8; rounds of 16 concurrent claims of 1 VCPU each, by new
consumers, through scheduler_ext's HTTP client with its re-sends turned off.
A correct placement lets exactly 8 succeed per round. Run:

    .venv/bin/python benchmarks/placement_race.py [--wsgi-workers 4] [--rounds 5]
"""

import argparse
import concurrent.futures
import uuid

from scheduler_ext import errors
from scheduler_ext.placement import AllocationWrite, Inventory
from scheduler_ext.placement.http import HttpPlacement
from scheduler_ext.lab.postgres import LocalPostgres
from scheduler_ext.lab.placement_server import LocalPlacement


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wsgi-workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with LocalPostgres() as db, \
            LocalPlacement(workers=args.wsgi_workers, database_url=db) as url:
        admin = HttpPlacement.from_url(url)
        prov = admin.create_provider("cn")
        admin.set_inventories(prov.uuid, prov.generation, {"VCPU": Inventory(8)})

        def claim(_):
            client = HttpPlacement.from_url(url)
            client.write_retries = 0
            try:
                client.post_allocations({str(uuid.uuid4()): AllocationWrite(
                    {prov.uuid: {"VCPU": 1}}, "p", "u", None)})
                return True
            except errors.CapacityExceeded:
                return False

        for n in range(args.rounds):
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                ok = sum(pool.map(claim, range(16)))
            used = admin.get_usages(prov.uuid)["VCPU"]
            print(f"round {n}: {ok} of 16 claims succeeded, VCPU used {used} "
                  f"of 8{'  OVERCOMMIT' if used > 8 else ''}", flush=True)
            for consumer in admin.get_provider_allocations(prov.uuid):
                admin.delete_allocations(consumer)


if __name__ == "__main__":
    main()
