"""The tree path: requests on provider trees, or with granular groups.

* ``supply``: who may supply each request group, per tree;
* ``solver``: ``TreeSolver``, one candidate per root, vectorized;
* ``enumeration``: ``TreeEnumerator``, placement's full answer, exact;
* ``branchless``: selections over per-root arrays without branches;
* ``query``: the entry point ``CapacityIndex`` calls (``fit`` and
  ``answer``) and the cached tree structure.
"""
