"""A server's placement query as nova builds it (``query``: the flavor,
granular groups, ports' and devices' groups, forbidden traits) and
nova's ``ignore_hosts`` as a ranking (``AvoidHosts``), for the lab's model
of nova (``nova_model``)."""

from __future__ import annotations

from typing import Mapping, Sequence

from scheduler_ext.placement.query import CandidateRequest, RequestGroup
from scheduler_ext.sources.base import Candidate


class AvoidHosts:
    """A ranking that drops the given roots (nova's ``ignore_hosts``, as a
    live migration's request spec carries the source)."""

    limit = 1000

    orders_all = False

    def __init__(self, roots: set[str]):
        self.roots = roots

    def rank(self, cands: Sequence[Candidate]) -> list[float | None]:
        return [None if c.root in self.roots else 0.0 for c in cands]


def query(flavor: Mapping[str, int], granular: tuple[str, ...] = (),
          extra: tuple[RequestGroup, ...] = (),
          forbidden: frozenset[str] = frozenset()) -> CandidateRequest:
    """A server's placement query: ``flavor`` unnumbered (with the
    ``forbidden`` traits) but for the classes in ``granular`` (one
    single-provider group each, suffixed ``f`` and the class's position),
    plus the ``extra`` groups."""
    groups = tuple(RequestGroup(f"f{i}", {rc: flavor[rc]})
                   for i, rc in enumerate(granular) if flavor.get(rc))
    groups += tuple(extra)
    unnumbered = {rc: n for rc, n in flavor.items()
                  if n and rc not in granular}
    return CandidateRequest(unnumbered, forbidden=forbidden, granular=groups,
                            group_policy="none" if len(groups) > 1 else None)
