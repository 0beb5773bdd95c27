"""``Rows``: the index's row storage as its readers see it.

The flat and tree solvers, ``Fit`` and ``pinned`` read a ``CapacityIndex``
through this interface, so that none of them imports the index (which
imports them). Rows are provider rows; a row keeps its provider for life.
"""

from __future__ import annotations

import threading
from typing import Mapping, Protocol, Sequence

import numpy as np

from scheduler_ext.engine.fleet.columns import Column
from scheduler_ext.engine.fleet.membership import AggregateSets, TraitBits
from scheduler_ext.engine.fleet.trees import Trees


class Rows(Protocol):
    """Read under ``lock`` and never written by readers, except
    ``tree_cache``, which the tree path keeps (``tree.query.state``).

    ``n_rows`` rows; ``uuids[row]``, ``row_of[uuid]``; ``alive``;
    ``key_hi``/``key_lo`` (uuid order); ``tree`` (row -> (parent uuid, root
    uuid) of nested rows); ``columns[rc]``; ``traits``; ``aggregates``;
    ``sharing_set`` (rows); ``structure_version`` (bumped when rows appear,
    die or change parent).
    """

    lock: threading.RLock
    n_rows: int
    uuids: list[str]
    row_of: dict[str, int]
    alive: np.ndarray
    key_hi: np.ndarray
    key_lo: np.ndarray
    tree: dict[int, tuple[str | None, str]]
    columns: dict[str, Column]
    traits: TraitBits
    aggregates: AggregateSets
    sharing_set: set[int]
    structure_version: int
    tree_cache: tuple | None

    def trees(self) -> Trees:
        """The tree structure of the rows."""

    def tree_members(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """Every live row of the trees holding ``rows``."""

    def sharing_rows(self) -> np.ndarray:
        """Sorted rows of the sharing providers."""

    def provider_summaries(self, rows: Sequence[int] | np.ndarray,
                           overlay: Mapping[tuple[int, str], int] | None = None
                           ) -> dict[str, dict]:
        """Placement's ``provider_summaries`` for ``rows``."""
