"""Placement's own schema (openstack-placement's table models) on a
sqlite file, written the way placement writes it, for the sql change
source's unit tests: an allocation write deletes the consumer's rows,
inserts new ones and bumps the generation of every provider in the new
rows; a DELETE of a consumer's allocations bumps nothing (placement 16.0.0,
``objects/allocation.py``; shared/placement-semantics.md sections 1, 4)."""

from __future__ import annotations

import uuid as uuidlib

import sqlalchemy as sa
from placement.db.sqlalchemy import models

CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")


class PlacementTables:
    """``url`` is an sqlite file with placement's schema."""

    def __init__(self, path: str):
        self.url = f"sqlite:///{path}"
        self.engine = sa.create_engine(self.url)
        models.BASE.metadata.create_all(self.engine)
        self.t = models.BASE.metadata.tables
        self.rc_id = {rc: i + 1 for i, rc in enumerate(CLASSES)}
        self.rp_id: dict[str, int] = {}
        self.next_rp_id = 1
        with self.engine.begin() as c:
            c.execute(self.t["resource_classes"].insert(),
                      [{"id": i, "name": rc} for rc, i in self.rc_id.items()])

    def add_provider(self, n: int, vcpu: int = 8, name: str | None = None) -> str:
        u = str(uuidlib.UUID(int=n))
        i = self.next_rp_id
        self.next_rp_id += 1
        with self.engine.begin() as c:
            c.execute(self.t["resource_providers"].insert(), [{
                "id": i, "uuid": u, "name": name or f"cn{n}", "generation": 0,
                "root_provider_id": i}])
            c.execute(self.t["inventories"].insert(), [{
                "resource_provider_id": i, "resource_class_id": self.rc_id[rc],
                "total": total, "reserved": 0, "min_unit": 1,
                "max_unit": total, "step_size": 1, "allocation_ratio": 1.0}
                for rc, total in (("VCPU", vcpu), ("MEMORY_MB", 4096))])
        self.rp_id[u] = i
        return u

    def _bump(self, c, rp: str) -> None:
        rps = self.t["resource_providers"]
        c.execute(rps.update().where(rps.c.id == self.rp_id[rp]).values(
            generation=rps.c.generation + 1))

    def put(self, consumer: str, allocs: dict[str, dict[str, int]],
            alloc_id: int | None = None) -> None:
        """placement's PUT /allocations/{consumer} (``alloc_id``: force the
        first new row's id, as a late commit or sqlite's id reuse would)."""
        a = self.t["allocations"]
        with self.engine.begin() as c:
            c.execute(a.delete().where(a.c.consumer_id == consumer))
            rows = [{"resource_provider_id": self.rp_id[rp], "consumer_id": consumer,
                     "resource_class_id": self.rc_id[rc], "used": n}
                    for rp, res in allocs.items() for rc, n in res.items()]
            if alloc_id is not None:
                for k, row in enumerate(rows):
                    row["id"] = alloc_id + k
            c.execute(a.insert(), rows)
            for rp in allocs:
                self._bump(c, rp)

    def delete(self, consumer: str) -> None:
        """placement's DELETE /allocations/{consumer}: no generation moves."""
        a = self.t["allocations"]
        with self.engine.begin() as c:
            c.execute(a.delete().where(a.c.consumer_id == consumer))

    def set_vcpu(self, rp: str, total: int) -> None:
        """An inventory change (bumps the generation, writes no allocation)."""
        inv = self.t["inventories"]
        with self.engine.begin() as c:
            c.execute(inv.update().where(
                (inv.c.resource_provider_id == self.rp_id[rp])
                & (inv.c.resource_class_id == self.rc_id["VCPU"])).values(
                total=total, max_unit=total))
            self._bump(c, rp)

    def delete_provider(self, rp: str) -> None:
        i = self.rp_id.pop(rp)
        with self.engine.begin() as c:
            for name in ("inventories", "resource_provider_traits",
                         "resource_provider_aggregates"):
                t = self.t[name]
                c.execute(t.delete().where(t.c.resource_provider_id == i))
            rps = self.t["resource_providers"]
            c.execute(rps.delete().where(rps.c.id == i))

    def usage(self, rp: str) -> dict[str, int]:
        a = self.t["allocations"]
        names = {i: rc for rc, i in self.rc_id.items()}
        with self.engine.connect() as c:
            rows = c.execute(sa.select(a.c.resource_class_id, sa.func.sum(a.c.used))
                             .where(a.c.resource_provider_id == self.rp_id[rp])
                             .group_by(a.c.resource_class_id)).all()
        return {names[i]: int(n) for i, n in rows}
