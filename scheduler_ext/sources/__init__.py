"""Candidate sources: the contract (``base``), the numpy engine as a source
(``engine``) and placement's own ``GET /allocation_candidates``
(``placement``, the fallback). Sources are loaded by stevedore name from
the ``scheduler_ext.engine`` namespace."""
