"""Placement through nova's own report client, inside nova's services.

``ReportClientAdapter`` gives ``placement.http.HttpPlacement`` the one
method it needs from a keystoneauth adapter, ``request(url, method, ...)``,
and serves it with nova's ``SchedulerReportClient`` (``get``/``post``/
``put``/``delete``): the session, auth plugin, endpoint, interface,
region, timeouts and retries nova built from its ``[placement]`` options,
and the global request id of the request being served, so placement's
logs tie our calls to nova's. ``[placement]`` is read directly only by the
standalone CLI.
"""

from __future__ import annotations

from typing import Any

from keystoneauth1 import exceptions as ks_exc
from oslo_context import context as oslo_context

from scheduler_ext import errors
from scheduler_ext.placement.http import HttpPlacement


def global_request_id() -> str | None:
    """The global request id of the request this thread serves (nova's
    RequestContext sets itself as the current context), or None."""
    ctx = oslo_context.get_current()
    return ctx.global_id if ctx is not None else None


class ReportClientAdapter:
    """The keystoneauth ``Adapter.request`` surface over nova's report
    client (see the module docstring)."""

    def __init__(self, report_client: Any):
        self.report_client = report_client

    def request(self, url: str, method: str, *, raise_exc: bool = False,
                microversion: str | None = None, json: Any = None) -> Any:
        """One request; the keystoneauth response (never raises for an HTTP
        status). Auth and other keystoneauth client errors that
        ``HttpPlacement`` does not map itself become PlacementUnavailable,
        so every caller sees our typed errors."""
        rc, gid = self.report_client, global_request_id()
        try:
            if method == "GET":
                return rc.get(url, version=microversion, global_request_id=gid)
            if method == "DELETE":
                return rc.delete(url, version=microversion,
                                 global_request_id=gid)
            if method == "POST":
                return rc.post(url, json, version=microversion,
                               global_request_id=gid)
            if method == "PUT":
                return rc.put(url, json, version=microversion,
                              global_request_id=gid)
        except (ks_exc.ConnectionError, ks_exc.EndpointNotFound,
                ks_exc.DiscoveryFailure, ks_exc.RequestTimeout):
            raise               # HttpPlacement maps these itself
        except ks_exc.ClientException as exc:
            raise errors.PlacementUnavailable(
                f"{method} {url}: nova's placement client failed: "
                f"{type(exc).__name__}: {exc}") from exc
        raise errors.InvalidRequest(f"unsupported method {method}",
                                    field="method", value=method)


def from_report_client(report_client: Any) -> HttpPlacement:
    """Our placement client over nova's ``SchedulerReportClient``."""
    return HttpPlacement(ReportClientAdapter(report_client))  # type: ignore[arg-type]
