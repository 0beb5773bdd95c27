"""Input checks shared by both placement backends.

They run before anything is sent or changed, so bad input never reaches
placement and never changes state. They are stricter than placement where
placement accepts nonsense (an allocation ratio <= 0, max_unit < min_unit).
Every failure is an ``InvalidInput`` (an ``InvalidRequest`` that prints as
our own check, not as placement's answer) naming the field and the value.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable, Iterable, Mapping, TypeVar

import os_resource_classes
import os_traits

from scheduler_ext.errors import InvalidInput, InvalidRequest
from scheduler_ext.placement.model import (MAX_INT, AllocationWrite, Inventory,
                                           WritableAllocations)

_NAME_RE = re.compile(r"^[A-Z0-9_]+$")
_CUSTOM_RE = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
_STANDARD_RCS = frozenset(os_resource_classes.STANDARDS)
_STANDARD_TRAITS = frozenset(os_traits.get_traits())
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                      r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


_Method = TypeVar("_Method", bound=Callable[..., Any])


def answered_as_placement(method: _Method) -> _Method:
    """For the embedded placement: input these checks refuse is answered as
    placement answers it, a plain 400 ``InvalidRequest`` (not our
    ``InvalidInput``)."""
    @functools.wraps(method)
    def answer(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except InvalidInput as exc:
            raise InvalidRequest(exc.detail, field=exc.field,
                                 value=exc.value) from None
    return answer  # type: ignore[return-value]


def bad(field: str, value: Any, why: str) -> InvalidInput:
    return InvalidInput(f"{field}={value!r}: {why}", field=field, value=value)


@functools.lru_cache(maxsize=1 << 16)
def _canonical_uuid(value: str) -> str | None:
    # the pattern admits only the hyphenated form, whose canonical string
    # is its lower case (what str(uuid.UUID(value)) gives)
    return value.lower() if _UUID_RE.match(value) else None


def uuid(value: Any, field: str) -> str:
    """Return ``value`` as a canonical lower-case UUID string."""
    canonical = _canonical_uuid(value) if isinstance(value, str) else None
    if canonical is None:
        raise bad(field, value, "not a UUID (8-4-4-4-12 hexadecimal digits)")
    return canonical


def resource_class(name: Any, field: str = "resource_class") -> str:
    """A standard class (os-resource-classes) or ``CUSTOM_[A-Z0-9_]+``."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise bad(field, name, "resource class names are [A-Z0-9_]+")
    if name not in _STANDARD_RCS and not _CUSTOM_RE.match(name):
        raise bad(field, name, "unknown standard resource class "
                  "(custom classes need the CUSTOM_ prefix)")
    return name


def custom_name(name: Any, field: str) -> str:
    if not isinstance(name, str) or not _CUSTOM_RE.match(name):
        raise bad(field, name, "custom names match CUSTOM_[A-Z0-9_]+")
    return name


def trait(name: Any, field: str = "trait") -> str:
    """A standard trait (os-traits) or ``CUSTOM_[A-Z0-9_]+``."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise bad(field, name, "trait names are [A-Z0-9_]+")
    if name not in _STANDARD_TRAITS and not _CUSTOM_RE.match(name):
        raise bad(field, name, "unknown standard trait "
                  "(custom traits need the CUSTOM_ prefix)")
    return name


def integer(value: Any, field: str, minimum: int, maximum: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(field, value, "must be an integer")
    if not minimum <= value <= maximum:
        raise bad(field, value, f"must be between {minimum} and {maximum}")
    return value


def generation(value: Any, field: str, nullable: bool = False) -> int | None:
    if value is None and nullable:
        return None
    return integer(value, field, 0, 2**63 - 1)


def inventory(rc: str, inv: Any) -> Inventory:
    """Check one inventory record; ``rc`` names it in messages."""
    if not isinstance(inv, Inventory):
        raise bad(f"inventories[{rc}]", inv, "must be an Inventory")
    f = f"inventories[{rc}]."
    integer(inv.total, f + "total", 1)
    integer(inv.reserved, f + "reserved", 0)
    integer(inv.min_unit, f + "min_unit", 1)
    integer(inv.max_unit, f + "max_unit", 1)
    integer(inv.step_size, f + "step_size", 1)
    if inv.max_unit < inv.min_unit:
        raise bad(f + "max_unit", inv.max_unit,
                  f"is below min_unit {inv.min_unit}")
    ratio = inv.allocation_ratio
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) \
            or not ratio > 0 or ratio != ratio or ratio == float("inf"):
        raise bad(f + "allocation_ratio", ratio, "must be a finite number > 0")
    if inv.reserved > inv.total:
        raise bad(f + "reserved", inv.reserved,
                  f"is above total {inv.total}")
    return inv


def inventories(invs: Any) -> dict[str, Inventory]:
    if not isinstance(invs, Mapping):
        raise bad("inventories", invs, "must be a mapping of class to Inventory")
    return {resource_class(rc): inventory(rc, inv) for rc, inv in invs.items()}


def names(values: Iterable[Any], check, field: str) -> frozenset[str]:
    if isinstance(values, (str, bytes)):
        raise bad(field, values, "must be a collection of names, not a string")
    return frozenset(check(v, field) for v in values)


def _is_mapping(value: Any) -> bool:
    # a plain dict first: the ABC check costs a microsecond per call
    return type(value) is dict or isinstance(value, Mapping)


def allocations(allocs: Any, field: str = "allocations") -> WritableAllocations:
    """``{rp_uuid: {rc: amount >= 1}}``; returns a normalized copy."""
    if not _is_mapping(allocs):
        raise bad(field, allocs, "must be a mapping of provider to resources")
    out: WritableAllocations = {}
    for rp, resources in allocs.items():
        rp_uuid = uuid(rp, f"{field} provider")
        if not _is_mapping(resources) or not resources:
            raise bad(f"{field}[{rp}]", resources,
                      "must be a non-empty mapping of class to amount")
        row: dict[str, int] = {}
        for rc, n in resources.items():
            # the common case (a standard class, a plain int in range)
            # skips the checks that name the field; anything else takes them
            if type(rc) is not str or rc not in _STANDARD_RCS:
                resource_class(rc, f"{field}[{rp}] resource class")
            if type(n) is not int or not 1 <= n <= MAX_INT:
                n = integer(n, f"{field}[{rp}][{rc}]", 1)
            row[rc] = n
        out[rp_uuid] = row
    return out


def allocation_write(consumer: Any, write: Any) -> tuple[str, AllocationWrite]:
    """Check one consumer's write; returns it normalized."""
    consumer = uuid(consumer, "consumer_uuid")
    if not isinstance(write, AllocationWrite):
        raise bad(f"write[{consumer}]", write, "must be an AllocationWrite")
    for field in ("project_id", "user_id"):
        value = getattr(write, field)
        if not isinstance(value, str) or not 1 <= len(value) <= 255:
            raise bad(field, value, "must be a string of 1 to 255 characters")
    if not isinstance(write.consumer_type, str) \
            or not _NAME_RE.match(write.consumer_type):
        raise bad("consumer_type", write.consumer_type, "must match [A-Z0-9_]+")
    generation(write.consumer_generation, "consumer_generation", nullable=True)
    return consumer, AllocationWrite(
        allocations=allocations(write.allocations),
        project_id=write.project_id, user_id=write.user_id,
        consumer_generation=write.consumer_generation,
        consumer_type=write.consumer_type)


def provider_name(name: Any) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= 200:
        raise bad("name", name, "must be a string of 1 to 200 characters")
    return name
