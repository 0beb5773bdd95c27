"""The embedded placement with placement's ``GET /allocation_candidates``,
answered by the plain-Python reference (``reference``, held to placement
16.0.0 by the parity tests): so the placement candidate source runs
without a placement service (the move oracle's sweeps, ``move_oracle``)."""

from __future__ import annotations

from scheduler_ext.lab.reference import Reference, from_snapshot
from scheduler_ext.placement.embedded import EmbeddedPlacement
from scheduler_ext.placement.query import CandidateRequest


class ReferencePlacement(EmbeddedPlacement):
    """An ``EmbeddedPlacement`` that is also a ``CandidatesEndpoint``."""

    def allocation_candidates(self, params: list[tuple[str, str]],
                              microversion: str = "") -> dict:
        """The answer body for ``params`` (1.39 syntax): every allocation
        request, at most ``limit``, and the summaries of their trees.
        InvalidRequest where placement answers 400."""
        query = CandidateRequest.from_query(params)
        answer = Reference(from_snapshot(self.snapshot())).candidates(query)
        if query.limit is not None:
            answer["allocation_requests"] = answer["allocation_requests"][:query.limit]
        return answer
