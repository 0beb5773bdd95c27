"""Trait and resource class names a query uses, checked as placement does.

Placement answers 400 for a trait or resource class it does not know
(``TraitNotFound``, ``ResourceClassNotFound``), not an empty answer.
Standard names (os-traits, os-resource-classes) are known to every
placement. A ``CUSTOM_`` name is known when a provider of the index holds
it or when the index was told placement's custom names
(``CapacityIndex.set_known_names``, from a full snapshot). Otherwise the
engine cannot tell and raises ``Unsupported`` for that query, so the
caller asks placement, which gives the right answer (its 400 or not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import os_resource_classes
import os_traits

from scheduler_ext import errors
from scheduler_ext.placement import validation
from scheduler_ext.placement.query import CandidateRequest

if TYPE_CHECKING:  # pragma: no cover
    from scheduler_ext.engine.index import CapacityIndex

_STANDARD_TRAITS = frozenset(os_traits.get_traits())
_STANDARD_CLASSES = frozenset(os_resource_classes.STANDARDS)


def used(request: CandidateRequest) -> tuple[set[str], set[str]]:
    """(trait names, resource class names) ``request`` mentions."""
    traits = set(request.root_required | request.root_forbidden)
    classes: set[str] = set()
    for g in request.groups:
        traits |= g.required | g.forbidden
        traits.update(t for names in g.required_any for t in names)
        classes.update(g.resources)
    return traits, classes


def check(ix: "CapacityIndex", request: CandidateRequest) -> None:
    """Raise ``InvalidRequest`` (placement's 400) for a name placement does
    not know, ``Unsupported`` when that cannot be told here."""
    if not isinstance(request, CandidateRequest):
        raise validation.bad("request", request, "must be a CandidateRequest")
    traits, classes = used(request)
    for name in sorted(traits):
        if name in _STANDARD_TRAITS or name in ix.traits.ids:
            continue
        if ix.known_traits is None:
            raise errors.Unsupported(
                f"trait {name} is on no provider here: only placement knows "
                "whether it exists")
        if name not in ix.known_traits:
            raise errors.InvalidRequest(f"No such trait(s): {name}",
                                        field="required", value=name)
    for rc in sorted(classes):
        if rc in _STANDARD_CLASSES or rc in ix.columns:
            continue
        if ix.known_classes is None:
            raise errors.Unsupported(
                f"resource class {rc} is on no provider here: only placement "
                "knows whether it exists")
        if rc not in ix.known_classes:
            raise errors.InvalidRequest(
                f"Invalid resource class in resources parameter: {rc}",
                field="resources", value=rc)
