"""What the storage planners read from nova's compute API, and the one
write they make (evacuate). Nova-free: JSON over any ``ComputeEndpoint``
(keystoneauth from nova.conf for the CLI; nova's own API client in its
functional harness).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Protocol

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session

from scheduler_ext.storage.errors import StorageError

#: embedded flavors in servers (2.47), services by id with forced_down
#: (2.53), evacuate without on_shared_storage (2.14), a host in the boot
#: request (2.74; our functional tests boot servers onto given hosts)
MICROVERSION = "2.74"


class ComputeUnreachable(StorageError):
    """Nova's compute API (or keystone before it) could not be reached."""


class ComputeEndpoint(Protocol):
    """GET and POST on the compute API; JSON bodies (None for no body)."""

    def get(self, path: str) -> Any: ...

    def post(self, path: str, body: Mapping[str, Any]) -> Any: ...


class KeystoneCompute:
    """A ``ComputeEndpoint`` over a keystoneauth adapter."""

    def __init__(self, adapter: ks_adapter.Adapter):
        self.adapter = adapter

    @classmethod
    def from_conf(cls, conf: Any, group: str = "placement") -> "KeystoneCompute":
        """The compute service of the catalog, with nova.conf's keystoneauth
        options of ``group`` (nova's own ``[placement]`` credentials carry
        the admin role the reads need)."""
        auth = ks_loading.load_auth_from_conf_options(conf, group)
        sess = ks_loading.load_session_from_conf_options(conf, group, auth=auth)
        return cls(ks_adapter.Adapter(sess, service_type="compute",
                                      interface=["internal", "public"]))

    @classmethod
    def from_url(cls, url: str, token: str = "admin") -> "KeystoneCompute":
        """A compute API with ``auth_strategy = noauth2`` (labs)."""
        sess = ks_session.Session(auth=None, additional_headers={
            "x-auth-token": token})
        return cls(ks_adapter.Adapter(sess, service_type="compute",
                                      endpoint_override=url.rstrip("/")))

    def _json(self, method: str, path: str, body: Any = None) -> Any:
        try:
            resp = self.adapter.request(path, method, raise_exc=False,
                                        microversion=MICROVERSION, json=body)
        except (ks_exc.ConnectionError, ks_exc.RequestTimeout) as exc:
            raise ComputeUnreachable(
                f"compute API unreachable: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:200]}") from None
        except ks_exc.ClientException as exc:
            raise StorageError(f"compute API {method} {path}: {exc}") from None
        if resp.status_code >= 400:
            raise StorageError(f"compute API {method} {path}: HTTP "
                               f"{resp.status_code}: {resp.text[:300]}")
        return resp.json() if resp.content else None

    def get(self, path: str) -> Any:
        return self._json("GET", path)

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        return self._json("POST", path, dict(body))


@dataclasses.dataclass(frozen=True)
class ComputeService:
    """A nova-compute service as the API shows it: ``state`` up or down
    (heartbeat), ``status`` enabled or disabled, ``forced_down`` set by the
    operator (or a fencing agent) once the host is known to be off."""

    id: str
    host: str
    state: str
    status: str
    forced_down: bool


def compute_services(api: ComputeEndpoint) -> list[ComputeService]:
    body = api.get("/os-services?binary=nova-compute")
    return sorted((ComputeService(str(s["id"]), s["host"], s["state"],
                                  s["status"], bool(s.get("forced_down")))
                   for s in body["services"]), key=lambda s: s.host)


def compute_nodes(api: ComputeEndpoint) -> dict[str, list[str]]:
    """Host -> the uuids of its compute nodes (also their resource
    providers' uuids; nova shows them as the hypervisors' ids from 2.53)."""
    out: dict[str, list[str]] = {}
    for hyp in api.get("/os-hypervisors/detail")["hypervisors"]:
        out.setdefault(hyp["service"]["host"], []).append(str(hyp["id"]))
    return out


def server(api: ComputeEndpoint, server_id: str) -> dict:
    return api.get(f"/servers/{server_id}")["server"]


def volume_attachments(api: ComputeEndpoint, server_id: str) -> list[dict]:
    return api.get(f"/servers/{server_id}/os-volume_attachments")[
        "volumeAttachments"]


def servers_on(api: ComputeEndpoint, host: str) -> list[dict]:
    """Every server nova places on ``host`` (all projects)."""
    return api.get(f"/servers/detail?all_tenants=1&host={host}")["servers"]


def host_of(srv: Mapping[str, Any]) -> str:
    host = srv.get("OS-EXT-SRV-ATTR:host")
    if not host:
        raise StorageError(f"server {srv.get('id')}: nova shows no host "
                           "(not admin, or not placed)")
    return str(host)


def evacuate(api: ComputeEndpoint, server_id: str, host: str | None) -> None:
    """Rebuild the server on ``host`` (None: a host nova's scheduler
    chooses); its source compute service must be down, as nova checks.
    Asynchronous: nova's 202 says only that it started."""
    api.post(f"/servers/{server_id}/action",
             {"evacuate": {"host": host} if host else {}})
