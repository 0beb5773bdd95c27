"""The numpy candidate engine: placement's allocation candidates, fast.

It answers a ``scheduler_ext.placement.query.CandidateRequest``.

* ``CapacityIndex`` -- the in-memory index built from a ``FleetSnapshot``
  (or a ``ColumnarFleet``), kept fresh by ``apply``/``refresh_provider``;
  ``candidates()`` answers like ``GET /allocation_candidates``;
  ``fit()``/``select()`` are the scheduler's fast path;
* ``Weigher`` -- nova-style RAM/CPU/disk weighing of the fitting roots;
  ``Weighing`` -- a weigher with nova's ``host_subset_size``.
"""

# numpy's unique() imports numpy.ma on its first call (about 14 ms): load
# it with the engine, at the service's start, not in its first request
import numpy.ma  # noqa: F401

from scheduler_ext.engine.fleet_arrays import ColumnarFleet, InventoryColumns
from scheduler_ext.engine.fit import Choice, Fit
from scheduler_ext.engine.index import CapacityIndex
from scheduler_ext.engine.weigh import DEFAULT_WEIGHING, Weigher, Weighing

__all__ = ["DEFAULT_WEIGHING", "CapacityIndex", "Choice", "ColumnarFleet", "Fit",
           "InventoryColumns", "Weigher", "Weighing"]
