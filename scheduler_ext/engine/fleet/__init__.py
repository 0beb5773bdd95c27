"""Storage of the fleet: what ``CapacityIndex`` keeps per provider row.

* ``columns``: one ``Column`` per resource class (inventory, used, free);
* ``membership``: trait bitsets and aggregate entries per row;
* ``trees``: the provider trees of the rows in numpy form;
* ``columnar``: ``ColumnarFleet``, a fleet as arrays, to build an index;
* ``rows``: ``Rows``, the row storage as the solvers read it.

Nothing here imports the solvers or the index.
"""
