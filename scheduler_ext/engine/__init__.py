"""The numpy candidate engine: placement's allocation candidates, fast.

It answers a ``scheduler_ext.placement.query.CandidateRequest``.

* ``CapacityIndex`` -- the in-memory index built from a ``FleetSnapshot``
  (or a ``ColumnarFleet``), kept fresh by ``apply``/``refresh_provider``;
  ``candidates()`` answers like ``GET /allocation_candidates``;
  ``fit()``/``select()`` are the scheduler's fast path;
* ``Weigher`` -- nova-style RAM/CPU/disk weighing of the fitting roots;
  ``Weighing`` -- a weigher with nova's ``host_subset_size``.

Grouped by concern, each group importing only the ones below it (the
engine contract of ``.importlinter``; no import circle between modules,
``tests/unit/test_architecture.py``):

* ``index`` -- ``CapacityIndex``: the rows and everything done to them
  (building, updates, released usage, names, provider summaries); it
  sends a query down the flat or the tree path;
* ``pinned`` -- a same-host candidate kept on the providers a moving
  server holds, checked against the index;
* ``tree/`` -- the tree path (provider trees, granular groups):
  ``supply`` (who may supply each group), ``solver`` (one pick per root,
  vectorized), ``enumeration`` (placement's full answer), ``query`` (the
  entry point and the cached tree structure), ``branchless``;
* ``fit`` -- ``Fit``, the fast path's answer as arrays, and ``Choice``;
  ``weigh`` -- the weighing of fitting roots;
* ``flat`` -- the flat path (every provider a root, the unnumbered group):
  ``Solver`` and its exact fallback ``Enumerator``;
* ``fleet/`` -- storage of the fleet: ``columns`` (one ``Column`` per
  resource class), ``membership`` (traits, aggregates), ``trees`` (the
  provider trees in numpy form), ``columnar`` (``ColumnarFleet``, a fleet
  as arrays) and ``rows`` (``Rows``, the interface the paths, ``Fit`` and
  ``pinned`` read the index through, so none of them imports it).
"""

# numpy's unique() imports numpy.ma on its first call (about 14 ms): load
# it with the engine, at the service's start, not in its first request
import numpy.ma  # noqa: F401

from scheduler_ext.engine.fit import Choice, Fit
from scheduler_ext.engine.fleet.columnar import ColumnarFleet, InventoryColumns
from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.engine.weigh import DEFAULT_WEIGHING, Weigher, Weighing

__all__ = ["DEFAULT_WEIGHING", "CapacityIndex", "Choice", "ColumnarFleet", "Fit",
           "InventoryColumns", "Weigher", "Weighing"]
