"""The mirrored host states as numpy columns: one row per compute node,
one array per value nova's filters and weighers read of a host state.

Each row is written from the host state nova's code built
(``host_state_view``), so its values are that state's values; a value that
is not a number (a None, a string) marks the row ``irregular`` and a
request that reaches it is ranked on host-state objects instead. Rows are
kept for the life of the process: a compute node that goes away has its
row marked dead, and takes it again if it comes back.
"""

from __future__ import annotations

import datetime
import itertools
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

_EPOCH = datetime.datetime(1970, 1, 1)
_MICROSECOND = datetime.timedelta(microseconds=1)

#: host-state attributes held as float64 columns, under the same names
NUMBERS = ("free_ram_mb", "free_disk_mb", "vcpus_total", "vcpus_used",
           "cpu_allocation_ratio", "num_io_ops", "num_instances", "failed_builds",
           "hypervisor_version")


def microseconds(moment: datetime.datetime) -> int:
    """``moment`` (naive UTC) as microseconds since the epoch, exactly."""
    return (moment - _EPOCH) // _MICROSECOND


def number_of(state: Any, name: str) -> float | None:
    """Attribute ``name`` of a host state as its column holds it (nova's
    weighers read ``float()`` of it; an unset hypervisor version as 0),
    None when it is not a real number."""
    value = getattr(state, name)
    if name == "hypervisor_version":
        value = value or 0
    return float(value) if isinstance(value, numbers.Real) else None


class HostColumns:
    """Per compute node (a row), the values of its built host state."""

    def __init__(self, capacity: int = 1024):
        self.size = 0
        #: compute node uuid -> row
        self.row_by_uuid: dict[str, int] = {}
        #: per row: the built host state, and its (host, node) key
        self.states: list[Any] = []
        self.keys: list[tuple[str, str]] = []
        self.row_by_key: dict[tuple[str, str], int] = {}
        #: host names numbered (``host_number``); per number, the lowered name
        self.host_numbers: dict[str, int] = {}
        self.lowered_hosts: list[str] = []
        #: (a uuid list, its rows here, ``size`` when mapped): ``rows_of_index``
        self._index_map: tuple[Sequence[str], np.ndarray, int] | None = None
        #: lowered host name -> the numbers of the names that lower to it
        self.numbers_of_lowered: dict[str, list[int]] = {}
        #: cell uuids numbered (``cell``)
        self.cell_numbers: dict[str, int] = {}
        self._arrays: dict[str, np.ndarray] = {}
        self._grow(capacity)

    def _grow(self, capacity: int) -> None:
        def grown(name: str, dtype) -> np.ndarray:
            new = np.zeros(capacity, dtype)
            old = self._arrays.get(name)
            if old is not None:
                new[:len(old)] = old
            return new
        for name in NUMBERS + ("pci_free",):
            self._arrays[name] = grown(name, np.float64)
        for name in ("live", "irregular", "disabled", "forced_down"):
            self._arrays[name] = grown(name, bool)
        for name in ("host_number", "cell"):
            self._arrays[name] = grown(name, np.int64)
        self._arrays["heartbeat_us"] = grown("heartbeat_us", np.int64)

    def column(self, name: str) -> np.ndarray:
        """The array ``name`` over every row (a view: do not change it)."""
        return self._arrays[name][:self.size]

    def number_of_host(self, host: str) -> int:
        number = self.host_numbers.get(host)
        if number is None:
            number = self.host_numbers[host] = len(self.lowered_hosts)
            self.lowered_hosts.append(host.lower())
            self.numbers_of_lowered.setdefault(host.lower(), []).append(number)
        return number

    def number_of_cell(self, cell_uuid: str) -> int:
        return self.cell_numbers.setdefault(cell_uuid, len(self.cell_numbers))

    def write(self, uuid: str, state: Any) -> None:
        """Row ``uuid`` holds ``state``'s values (a row is added for a new
        compute node)."""
        row = self.row_by_uuid.get(uuid)
        if row is None:
            row = self.row_by_uuid[uuid] = self.size
            if row == len(self._arrays["live"]):
                self._grow(2 * row)
            self.size += 1
            self.states.append(state)
            self.keys.append((state.host, state.nodename))
        else:
            self.states[row] = state
            del self.row_by_key[self.keys[row]]
            self.keys[row] = (state.host, state.nodename)
        self.row_by_key[self.keys[row]] = row
        a = self._arrays
        irregular = False
        for name in NUMBERS:
            value = number_of(state, name)
            irregular |= value is None
            a[name][row] = np.nan if value is None else value
        pools = state.pci_stats.pools if state.pci_stats else ()
        a["pci_free"][row] = sum(pool["count"] for pool in pools)
        service = state.service
        a["disabled"][row] = bool(service["disabled"])
        a["forced_down"][row] = bool(service.get("forced_down"))
        beat = service.get("last_seen_up") or service["created_at"]
        if isinstance(beat, datetime.datetime):
            # nova's db servicegroup driver reads a zoned one as UTC
            a["heartbeat_us"][row] = microseconds(beat.replace(tzinfo=None))
        else:
            irregular = True        # text from RPC: read by the objects' path
        a["host_number"][row] = self.number_of_host(state.host)
        a["cell"][row] = self.number_of_cell(state.cell_uuid)
        a["irregular"][row] = irregular
        a["live"][row] = True

    def drop(self, uuid: str) -> None:
        """Row ``uuid`` (if any) is dead: no request reads it."""
        row = self.row_by_uuid.get(uuid)
        if row is not None:
            self._arrays["live"][row] = False

    def rows_of_index(self, uuids: Sequence[str], index_rows: np.ndarray) -> np.ndarray:
        """Per row of ``uuids`` (a list that only grows; -1: none), the
        live row of that uuid here, or -1 (int64). The rows of ``uuids``
        are mapped once, and again only where they had none and rows were
        added here since."""
        held = self._index_map
        if held is None or held[0] is not uuids:
            held = (uuids, np.zeros(0, dtype=np.int64), 0)
        _, mapping, size_seen = held
        if len(uuids) > len(mapping):
            mapping = np.concatenate([mapping, self._held_rows(uuids[len(mapping):])])
        if self.size != size_seen:
            missing = np.flatnonzero(mapping < 0)
            mapping[missing] = self._held_rows([uuids[i] for i in missing.tolist()])
        self._index_map = (uuids, mapping, self.size)
        found = np.full(len(index_rows), -1, dtype=np.int64)
        known = index_rows >= 0
        found[known] = mapping[index_rows[known]]
        return self._live(found)

    def rows(self, uuids: Sequence[str]) -> np.ndarray:
        """Per uuid, its live row, or -1 (int64)."""
        return self._live(self._held_rows(uuids))

    def _held_rows(self, uuids: Sequence[str]) -> np.ndarray:
        """Per uuid, its row (live or dead; a row is a uuid's for good), or -1."""
        return np.fromiter(map(self.row_by_uuid.get, uuids, itertools.repeat(-1)),
                           dtype=np.int64, count=len(uuids))

    def _live(self, rows: np.ndarray) -> np.ndarray:
        return np.where(self._arrays["live"][rows] & (rows >= 0), rows, -1)

