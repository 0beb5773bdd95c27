"""The placement client protocol over HTTP, with keystoneauth1.

Every logical write is exactly one request, so a failure never leaves a
partial write. Answers are mapped to the typed errors of
``scheduler_ext.errors``; connection failures become PlacementUnavailable.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from typing import Any, Iterable, Mapping

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from oslo_log import log as logging

from scheduler_ext import errors
from scheduler_ext.placement import validation
from scheduler_ext.placement.client import read_listed_providers
from scheduler_ext.placement.model import (
    SHARING_TRAIT, AllocationWrite, ConsumerAllocations, FleetSnapshot,
    Inventory, Provider)

LOG = logging.getLogger(__name__)

#: The newest microversion we speak (placement 16.0.0's newest); the one
#: used is the lower of this and the service's.
MICROVERSION = "1.39"
#: Consumer generations: without them no write of ours is safe.
MIN_MICROVERSION = "1.28"


def _parse(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)
def unreachable_reason(exc: Exception) -> str:
    """Why a keystoneauth request got no answer, in a few words, with the
    address it tried."""
    text = str(exc)
    at = re.search(r"(https?://[^\s:/]+(?::\d+)?[^\s:]*)", text)
    where = f" ({at.group(1)})" if at else ""
    if isinstance(exc, ks_exc.SSLError):
        # the library's words tell a wrong scheme from an untrusted certificate
        return ("TLS handshake failed (an https:// address for an http:// "
                f"server, or a certificate not trusted): {text}")
    if isinstance(exc, (ks_exc.ConnectTimeout, ks_exc.RequestTimeout)):
        return f"no answer in time{where}"
    if isinstance(exc, ks_exc.EndpointNotFound):
        return "the service catalog lists no placement endpoint for this region and interface"
    if isinstance(exc, ks_exc.DiscoveryFailure):
        return f"version discovery failed{where}: {text}"
    for needle, reason in (("Name or service not known", "unknown host"),
                           ("Temporary failure in name resolution", "unknown host"),
                           ("nodename nor servname", "unknown host"),
                           ("Connection refused", "connection refused (nothing listens there)"),
                           ("No route to host", "no route to host"),
                           ("Network is unreachable", "network unreachable")):
        if needle in text:
            return f"{reason}{where}"
    return f"connection failed{where}: {text}"


_INV_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size",
               "allocation_ratio")


class HttpPlacement:
    """``PlacementClient`` talking to a placement service."""

    def __init__(self, adapter: ks_adapter.Adapter, *, write_retries: int = 3,
                 retry_delay: float = 0.05):
        """``write_retries``: how often an allocation write is re-sent after
        placement ran out of its own retries on a provider-generation race
        (409 ``placement.concurrent_update`` that is not a consumer
        generation conflict); the delay doubles each time (seconds)."""
        self._adapter = adapter
        self._version: str | None = None
        self.write_retries = write_retries
        self.retry_delay = retry_delay
        #: allocation writes re-sent after a provider-generation race
        self.retried_writes = 0

    @property
    def microversion(self) -> str:
        """Negotiated once: min(MICROVERSION, the service's maximum)."""
        if self._version is None:
            root = self._call("GET", "/", version=None)
            newest = max((v for v in root.get("versions", ())
                          if v.get("status") == "CURRENT"),
                         key=lambda v: _parse(v["max_version"]),
                         default=None) or root["versions"][0]
            best = min(_parse(newest["max_version"]), _parse(MICROVERSION))
            if best < _parse(MIN_MICROVERSION):
                raise errors.PlacementError(
                    f"placement's newest microversion is "
                    f"{newest['max_version']}; scheduler-ext needs "
                    f"{MIN_MICROVERSION} (consumer generations)", status=501)
            self._version = "%d.%d" % best
        return self._version

    @classmethod
    def from_url(cls, url: str, token: str = "admin", timeout: float = 30.0,
                 connect_retries: int = 2) -> "HttpPlacement":
        """A client for a placement running with ``auth_strategy = noauth2``.

        ``connect_retries``: a request whose connection fails is sent again
        (keystoneauth's own retry, 0.5 s then 1 s apart). A server closes an
        idle keep-alive connection when it likes; a request sent on it just
        then fails before placement reads it. Re-sending is safe: every
        allocation write carries consumer generations, so it cannot apply
        twice. (``from_conf`` takes ``[placement] connect_retries`` from
        the configuration, as nova's own client does.)"""
        sess = ks_session.Session(auth=None, timeout=timeout,
                                  additional_headers={"x-auth-token": token})
        return cls(ks_adapter.Adapter(sess, service_type="placement",
                                      endpoint_override=url.rstrip("/"),
                                      connect_retries=connect_retries))

    @classmethod
    def from_conf(cls, conf, group: str = "placement") -> "HttpPlacement":
        """A client built from nova.conf's ``[placement]`` keystoneauth options
        (auth plugin, region, valid_interfaces, endpoint_override...)."""
        auth = ks_loading.load_auth_from_conf_options(conf, group)
        sess = ks_loading.load_session_from_conf_options(conf, group, auth=auth)
        adapter = ks_loading.load_adapter_from_conf_options(
            conf, group, session=sess, auth=auth)
        return cls(adapter)

    # ------------------------------------------------------------ transport
    def _call(self, method: str, url: str, body: Any = None,
              ok: tuple[int, ...] = (200, 204), version: str | None = "",
              retry_write: bool = False) -> Any:
        """One request; typed errors. ``version`` "" means the negotiated
        microversion, None none. ``retry_write`` re-sends an allocation
        write lost to a provider-generation race (it carries consumer
        generations, so a re-send can never apply twice)."""
        kwargs: dict[str, Any] = {"raise_exc": False}
        if version is not None:
            kwargs["microversion"] = version or self.microversion
        if body is not None:
            kwargs["json"] = body
        for attempt in range(self.write_retries + 1 if retry_write else 1):
            try:
                return self._send(method, url, ok, kwargs)
            except errors.ConcurrentUpdate as exc:
                if (not retry_write or attempt == self.write_retries
                        or "consumer generation conflict" in exc.detail):
                    raise
                LOG.debug("%s %s: %s; retry %d", method, url, exc, attempt + 1)
                self.retried_writes += 1
                time.sleep(self.retry_delay * 2 ** attempt)

    def _send(self, method: str, url: str, ok: tuple[int, ...],
              kwargs: dict[str, Any]) -> Any:
        try:
            resp = self._adapter.request(url, method, **kwargs)
        except (ks_exc.ConnectionError,     # refused, timeout, TLS, unknown
                ks_exc.EndpointNotFound, ks_exc.DiscoveryFailure,
                ks_exc.RequestTimeout) as exc:
            raise errors.PlacementUnreachable(
                f"{method} {url}: placement unreachable: {unreachable_reason(exc)}"
            ) from exc
        if resp.status_code in ok:
            try:
                return resp.json() if resp.content else None
            except ValueError:
                raise errors.PlacementUnreachable(
                    f"{method} {url}: the answer is not JSON "
                    f"({resp.headers.get('content-type', 'no content type')}): "
                    "is this address placement's?") from None
        detail, code = resp.text, None
        try:
            err = resp.json()["errors"][0]
            detail, code = err.get("detail", detail), err.get("code")
        except (ValueError, KeyError, IndexError, TypeError):
            pass
        # placement prefixes webob's generic explanation; keep its own words
        detail = detail.split("\n\n")[-1]
        raise errors.error_for_status(
            resp.status_code, f"{method} {url}: {detail.strip()}", code,
            resp.headers.get("openstack-request-id"))

    # ---------------------------------------------------------- providers
    @staticmethod
    def _provider(d: Mapping[str, Any]) -> Provider:
        return Provider(d["uuid"], d["name"], d["generation"],
                        d["root_provider_uuid"], d.get("parent_provider_uuid"))

    def list_providers(self) -> list[Provider]:
        return [self._provider(p) for p in
                self._call("GET", "/resource_providers")["resource_providers"]]

    def list_sharing_providers(self, aggregates: Iterable[str]) -> list[Provider]:
        aggs = sorted(validation.names(aggregates, validation.uuid, "aggregates"))
        if not aggs:
            return []
        query = urllib.parse.urlencode([("member_of", "in:" + ",".join(aggs)),
                                        ("required", SHARING_TRAIT)])
        return [self._provider(p) for p in self._call(
            "GET", f"/resource_providers?{query}")["resource_providers"]]

    def get_provider(self, rp_uuid: str) -> Provider:
        rp_uuid = validation.uuid(rp_uuid, "resource_provider_uuid")
        return self._provider(self._call("GET", f"/resource_providers/{rp_uuid}"))

    def create_provider(self, name: str, uuid: str | None = None,
                        parent_provider_uuid: str | None = None) -> Provider:
        body: dict[str, Any] = {"name": validation.provider_name(name)}
        if uuid:
            body["uuid"] = validation.uuid(uuid, "uuid")
        if parent_provider_uuid:
            body["parent_provider_uuid"] = validation.uuid(
                parent_provider_uuid, "parent_provider_uuid")
        return self._provider(self._call("POST", "/resource_providers", body))

    def delete_provider(self, rp_uuid: str) -> None:
        rp_uuid = validation.uuid(rp_uuid, "resource_provider_uuid")
        self._call("DELETE", f"/resource_providers/{rp_uuid}")

    def create_resource_class(self, name: str) -> None:
        name = validation.custom_name(name, "resource_class")
        self._call("PUT", f"/resource_classes/{name}", ok=(201, 204))

    def create_trait(self, name: str) -> None:
        name = validation.custom_name(name, "trait")
        self._call("PUT", f"/traits/{name}", ok=(201, 204))

    def get_inventories(self, rp_uuid: str) -> tuple[int, dict[str, Inventory]]:
        rp_uuid = validation.uuid(rp_uuid, "resource_provider_uuid")
        d = self._call("GET", f"/resource_providers/{rp_uuid}/inventories")
        return d["resource_provider_generation"], {
            rc: Inventory(**{f: inv[f] for f in _INV_FIELDS})
            for rc, inv in d["inventories"].items()}

    def set_inventories(self, rp_uuid: str, generation: int,
                        inventories: Mapping[str, Inventory]) -> int:
        rp_uuid = validation.uuid(rp_uuid, "resource_provider_uuid")
        invs = validation.inventories(inventories)
        validation.generation(generation, "resource_provider_generation")
        d = self._call("PUT", f"/resource_providers/{rp_uuid}/inventories", {
            "resource_provider_generation": generation,
            "inventories": {rc: inv.as_dict() for rc, inv in invs.items()}})
        return d["resource_provider_generation"]

    def _get_names(self, rp_uuid: str, kind: str) -> tuple[int, frozenset[str]]:
        """(generation, names) of ``/resource_providers/{rp}/{kind}``."""
        rp_uuid = validation.uuid(rp_uuid, "resource_provider_uuid")
        d = self._call("GET", f"/resource_providers/{rp_uuid}/{kind}")
        return d["resource_provider_generation"], frozenset(d[kind])

    def _put_names(self, rp_uuid: str, generation: int, kind: str,
                   names: frozenset[str]) -> int:
        """Replace ``/resource_providers/{rp}/{kind}``; the new generation."""
        rp_uuid = validation.uuid(rp_uuid, "resource_provider_uuid")
        validation.generation(generation, "resource_provider_generation")
        d = self._call("PUT", f"/resource_providers/{rp_uuid}/{kind}", {
            "resource_provider_generation": generation, kind: sorted(names)})
        return d["resource_provider_generation"]

    def get_traits(self, rp_uuid: str) -> tuple[int, frozenset[str]]:
        return self._get_names(rp_uuid, "traits")

    def set_traits(self, rp_uuid: str, generation: int,
                   traits: Iterable[str]) -> int:
        rp_uuid = validation.uuid(rp_uuid, "resource_provider_uuid")
        names = validation.names(traits, validation.trait, "traits")
        return self._put_names(rp_uuid, generation, "traits", names)

    def get_aggregates(self, rp_uuid: str) -> tuple[int, frozenset[str]]:
        return self._get_names(rp_uuid, "aggregates")

    def set_aggregates(self, rp_uuid: str, generation: int,
                       aggregates: Iterable[str]) -> int:
        rp_uuid = validation.uuid(rp_uuid, "resource_provider_uuid")
        aggs = validation.names(aggregates, validation.uuid, "aggregates")
        return self._put_names(rp_uuid, generation, "aggregates", aggs)

    def get_usages(self, rp_uuid: str) -> dict[str, int]:
        rp_uuid = validation.uuid(rp_uuid, "resource_provider_uuid")
        return dict(self._call("GET", f"/resource_providers/{rp_uuid}/usages")["usages"])

    def get_consumer(self, consumer_uuid: str) -> ConsumerAllocations:
        consumer_uuid = validation.uuid(consumer_uuid, "consumer_uuid")
        d = self._call("GET", f"/allocations/{consumer_uuid}")
        allocs = {rp: dict(v["resources"]) for rp, v in d["allocations"].items()}
        if not allocs:
            return ConsumerAllocations({})
        return ConsumerAllocations(allocs, d.get("consumer_generation"),
                                   d.get("project_id"), d.get("user_id"),
                                   d.get("consumer_type"))

    def get_provider_allocations(self, rp_uuid: str) -> dict[str, dict[str, int]]:
        rp_uuid = validation.uuid(rp_uuid, "resource_provider_uuid")
        d = self._call("GET", f"/resource_providers/{rp_uuid}/allocations")
        return {c: dict(v["resources"]) for c, v in d["allocations"].items()}

    def _write_body(self, write: AllocationWrite) -> dict[str, Any]:
        body = {"allocations": {rp: {"resources": dict(res)}
                                for rp, res in write.allocations.items()},
                "project_id": write.project_id, "user_id": write.user_id,
                "consumer_generation": write.consumer_generation}
        if _parse(self.microversion) >= (1, 38):
            body["consumer_type"] = write.consumer_type
        return body

    def put_allocations(self, consumer_uuid: str, write: AllocationWrite) -> None:
        consumer_uuid, write = validation.allocation_write(consumer_uuid, write)
        self._call("PUT", f"/allocations/{consumer_uuid}", self._write_body(write),
                   retry_write=True)

    def post_allocations(self, writes: Mapping[str, AllocationWrite]) -> None:
        if not isinstance(writes, Mapping) or not writes:
            raise validation.bad("allocations", writes,
                                 "must name at least one consumer")
        checked = dict(validation.allocation_write(c, w) for c, w in writes.items())
        self._call("POST", "/allocations",
                   {c: self._write_body(w) for c, w in checked.items()},
                   retry_write=True)

    def delete_allocations(self, consumer_uuid: str) -> None:
        consumer_uuid = validation.uuid(consumer_uuid, "consumer_uuid")
        self._call("DELETE", f"/allocations/{consumer_uuid}")

    def allocation_candidates(self, params: list[tuple[str, str]],
                              microversion: str = "") -> dict:
        """``GET /allocation_candidates`` with ``params`` (1.39 syntax), at
        ``microversion`` (default: the negotiated one)."""
        query = urllib.parse.urlencode(params)
        return self._call("GET", f"/allocation_candidates?{query}",
                          version=microversion)

    def snapshot(self) -> FleetSnapshot:
        """Four GETs per provider: slow at scale (see placement-semantics.md
        section 5); the engine's bulk sources live elsewhere. A provider
        deleted between the list and its read is left out. Two more GETs
        read the custom traits and resource classes placement knows."""
        traits = self._call("GET", "/traits?name=startswith:CUSTOM_", version="1.6")
        classes = self._call("GET", "/resource_classes", version="1.7")
        return FleetSnapshot(
            tuple(read_listed_providers(self, self.list_providers())[0]),
            custom_traits=frozenset(traits["traits"]),
            custom_classes=frozenset(c["name"] for c in classes["resource_classes"]
                                     if c["name"].startswith("CUSTOM_")))
