"""Moves: the scheduling request (``request``), the consumers a decision
reads (``consumers``), the allocation state machine of a claim
(``strategy``) and the repair of what nova's own code leaves
(``reconcile``)."""
