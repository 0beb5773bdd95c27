"""Where a server's disk is counted, for an evacuation to a named host.

nova's conductor asks placement for a named evacuation destination with
``in_tree=<that host's compute node>``, and ``in_tree`` leaves sharing
providers out of the request (placement 16.0.0; the engine does the same).
So a server whose DISK_GB is held by a sharing provider finds no valid host
when the named host's compute node offers no DISK_GB of its own (after
``storage migrate-disk`` closed it, say): the 202 ends in ERROR on the
fenced source (``tests/nova/cases_storage.py``,
``StockMovesBypassingTheScheduler``). The planner needs two facts to avoid
that, both read from placement: whether the server's DISK_GB is on a
sharing provider, and whether a host's compute node offers DISK_GB.
"""

from __future__ import annotations

from typing import Iterable, Protocol

from scheduler_ext.placement import PlacementClient
from scheduler_ext.placement.model import SHARING_TRAIT
from scheduler_ext.storage import compute_api

DISK = "DISK_GB"


class DiskPlacement(Protocol):
    """What placement says about servers' disks and hosts' compute nodes."""

    def sharing_disk(self, server_ids: Iterable[str]) -> set[str]:
        """The servers whose DISK_GB a sharing provider holds."""
        ...

    def nodes_offering_disk(self, hosts: Iterable[str]) -> set[str]:
        """The hosts whose compute node offers DISK_GB of its own (1 GiB of
        capacity at least)."""
        ...


class PlacementDisk:
    """A ``DiskPlacement`` over placement, with the compute API naming each
    host's compute node (its provider has the node's uuid, 2.53+)."""

    def __init__(self, client: PlacementClient,
                 compute: compute_api.ComputeEndpoint):
        self.client = client
        self.compute = compute

    def sharing_disk(self, server_ids: Iterable[str]) -> set[str]:
        sharing: dict[str, bool] = {}
        out = set()
        for sid in server_ids:
            for rp, amounts in self.client.get_consumer(sid).allocations.items():
                if not amounts.get(DISK):
                    continue
                if rp not in sharing:
                    sharing[rp] = SHARING_TRAIT in self.client.get_traits(rp)[1]
                if sharing[rp]:
                    out.add(sid)
        return out

    def nodes_offering_disk(self, hosts: Iterable[str]) -> set[str]:
        nodes = compute_api.compute_nodes(self.compute)
        out = set()
        for host in hosts:
            for node in nodes.get(host, []):
                inv = self.client.get_inventories(node)[1].get(DISK)
                if inv is not None and inv.capacity >= 1:
                    out.add(host)
        return out
