"""Typed errors shared by every layer.

Placement answers with an HTTP status and, for 409s, an error code; both
backends of the placement client raise the same classes so that callers
handle one set of exceptions whichever backend is in use.
"""

from __future__ import annotations

from typing import Any

UNDEFINED_CODE = "placement.undefined_code"
CONCURRENT_UPDATE = "placement.concurrent_update"
INVENTORY_INUSE = "placement.inventory.inuse"
DUPLICATE_NAME = "placement.duplicate_name"
PROVIDER_IN_USE = "placement.resource_provider.inuse"
PROVIDER_CANNOT_DELETE_PARENT = "placement.resource_provider.cannot_delete_parent"
PROVIDER_NOT_FOUND = "placement.resource_provider.not_found"


class SchedulerExtError(Exception):
    """Base of every error this package raises on purpose."""


class PlacementError(SchedulerExtError):
    """An error answered by placement (or by the embedded twin of it).

    ``status`` is the HTTP status placement uses for the case, ``code`` its
    error code (``placement.undefined_code`` when it has none).
    """

    status: int = 500

    def __init__(self, detail: str, *, code: str = UNDEFINED_CODE,
                 status: int | None = None, request_id: str | None = None):
        super().__init__(detail)
        self.detail = detail
        self.code = code
        if status is not None:
            self.status = status
        self.request_id = request_id

    def __str__(self) -> str:
        text = f"{self.status} {self.code}: {self.detail}"
        if self.request_id:
            text += f" (request {self.request_id})"
        return text


class InvalidRequest(PlacementError):
    """400: the request is malformed or names something that does not exist.

    ``field`` and ``value`` name the offending input when it is known.
    """

    status = 400

    def __init__(self, detail: str, *, field: str | None = None,
                 value: Any = None, **kwargs: Any):
        super().__init__(detail, **kwargs)
        self.field = field
        self.value = value


class InvalidInput(InvalidRequest):
    """Refused by our own checks before anything was sent to placement.

    It is an ``InvalidRequest`` (placement would answer such input with a
    400, and nothing changed), so callers handle both alike; it prints as
    ours, never as an answer from placement. The embedded placement answers
    the same input with a plain ``InvalidRequest``, as the real one does.
    """

    def __str__(self) -> str:
        return f"invalid input (refused before reaching placement): {self.detail}"


class NotFound(PlacementError):
    """404: the provider, consumer or allocation is not there."""

    status = 404


class Conflict(PlacementError):
    """409: the write was refused; nothing changed."""

    status = 409


class ConcurrentUpdate(Conflict):
    """409 ``placement.concurrent_update``: a generation did not match."""

    def __init__(self, detail: str, **kwargs: Any):
        kwargs.setdefault("code", CONCURRENT_UPDATE)
        super().__init__(detail, **kwargs)


class CapacityExceeded(Conflict):
    """409 without a specific code: capacity or min/max/step violated,
    or the provider has no inventory of the class."""


class InUse(Conflict):
    """409 ``placement.inventory.inuse`` / ``placement.resource_provider.inuse``."""


class PlacementUnavailable(PlacementError):
    """Placement could not be reached or failed (connection error, 5xx).

    The write may not have happened; callers must re-read before retrying.
    """

    status = 503


class PlacementUnreachable(PlacementUnavailable):
    """No answer from placement at all (connection refused, an unknown
    host, a TLS mismatch, a timeout, no endpoint in the catalog): nothing
    placement said, so it is shown as its detail alone, in our words,
    without an HTTP status or error code."""

    def __str__(self) -> str:
        return self.detail


class PlacementDatabaseError(PlacementUnavailable):
    """Placement's database could not be read (the sql change source): our
    own read, not an answer of placement's API, so it is shown as its
    detail alone, without an HTTP status or error code."""

    def __str__(self) -> str:
        return self.detail


class ConfigError(SchedulerExtError):
    """A configuration option names something that cannot be used (an
    unknown plugin, a missing companion option). ``option`` names it."""

    def __init__(self, detail: str, *, option: str, value: Any = None):
        super().__init__(detail)
        self.option = option
        self.value = value


class NoValidHost(SchedulerExtError):
    """No host could be claimed for the request; nothing was written."""


class ConsumerExists(SchedulerExtError):
    """A boot was scheduled for an instance that already holds allocations
    (placement refused the claim for a new consumer); nothing was written."""


class Unsupported(SchedulerExtError):
    """The engine cannot answer this query exactly; ask placement instead."""


def error_for_status(status: int, detail: str, code: str | None = None,
                     request_id: str | None = None) -> PlacementError:
    """Build the typed error for an HTTP answer from placement."""
    code = code or UNDEFINED_CODE
    if status == 400:
        return InvalidRequest(detail, code=code, request_id=request_id)
    if status == 404:
        return NotFound(detail, code=code, request_id=request_id)
    if status == 409:
        if code == CONCURRENT_UPDATE:
            return ConcurrentUpdate(detail, request_id=request_id)
        if code in (INVENTORY_INUSE, PROVIDER_IN_USE):
            return InUse(detail, code=code, request_id=request_id)
        if code == UNDEFINED_CODE and "nable to allocate inventory" in detail:
            return CapacityExceeded(detail, code=code, request_id=request_id)
        return Conflict(detail, code=code, request_id=request_id)
    if status >= 500:
        return PlacementUnavailable(detail, status=status, code=code,
                                    request_id=request_id)
    return PlacementError(detail, status=status, code=code, request_id=request_id)
