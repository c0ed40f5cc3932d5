"""Compute Engine's REST API (compute v1), called over google-auth's `AuthorizedSession`.

Every Compute call of ours (the worker groups' providers, zone failover, the quota pre-flight,
the tasks in ops/) goes through `ComputeRest.call`, by the method's discovery id
(`instances.get`) and its path template as Compute's discovery document writes them (`METHODS`,
checked against the document google-api-python-client ships by
tests/infra/test_compute_rest_methods.py). Answers are the API's JSON (camelCase dicts, enums
as their names, absent fields absent); an error answer is raised as
`google.api_core.exceptions.from_http_response`, what google-cloud-compute's REST transport
raised, so retry.py and every `except NotFound`/`PreconditionFailed` read it as before.

Why not `google.cloud.compute_v1`: its package `__init__` loads every service client (~1,300
modules, 1.5-2 s of CPU) whichever one is used, and every provider plugin start, `invoke up`
and `invoke status` paid it. google-auth's transport and google-api-core's exceptions cost a
seventh of that, and are imported only when a first call is made.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from google.auth.credentials import Credentials
    from google.auth.transport.requests import AuthorizedSession

    from infra.workers.retry import RetryPolicy

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
COMPUTE_BASE = "https://compute.googleapis.com/compute/v1"
DEFAULT_TIMEOUT_S = 600.0
"""google-cloud-compute's default timeout for every Compute method (its transports' base)."""


@dataclass(frozen=True)
class Method:
    """One method of the compute v1 discovery document: its HTTP verb, its path template
    (relative to `compute/v1/`) and the query parameters we send it."""

    http: str
    path: str
    query: frozenset[str] = frozenset()


_LIST = frozenset({"filter", "pageToken", "maxResults"})
_CREATE = frozenset({"requestId"})
_ZONE = "projects/{project}/zones/{zone}"
_INSTANCE = _ZONE + "/instances/{instance}"

METHODS: dict[str, Method] = {
    "instances.aggregatedList": Method("GET", "projects/{project}/aggregated/instances", _LIST),
    "instances.list": Method("GET", _ZONE + "/instances", _LIST),
    "instances.get": Method("GET", _INSTANCE),
    "instances.insert": Method("POST", _ZONE + "/instances", _CREATE),
    "instances.bulkInsert": Method("POST", _ZONE + "/instances/bulkInsert", _CREATE),
    "instances.delete": Method("DELETE", _INSTANCE),
    "instances.stop": Method("POST", _INSTANCE + "/stop"),
    "instances.start": Method("POST", _INSTANCE + "/start"),
    "instances.setMetadata": Method("POST", _INSTANCE + "/setMetadata"),
    "instances.setLabels": Method("POST", _INSTANCE + "/setLabels"),
    "instances.getGuestAttributes": Method("GET", _INSTANCE + "/getGuestAttributes",
                                           frozenset({"queryPath"})),
    "zoneOperations.wait": Method("POST", _ZONE + "/operations/{operation}/wait"),
    "zoneOperations.list": Method("GET", _ZONE + "/operations", _LIST),
    "zones.list": Method("GET", "projects/{project}/zones", _LIST),
    "machineTypes.get": Method("GET", _ZONE + "/machineTypes/{machineType}"),
    "acceleratorTypes.get": Method("GET", _ZONE + "/acceleratorTypes/{acceleratorType}"),
    "regions.get": Method("GET", "projects/{project}/regions/{region}"),
    "subnetworks.get": Method("GET", "projects/{project}/regions/{region}/subnetworks/"
                                     "{subnetwork}"),
    "subnetworks.list": Method("GET", "projects/{project}/regions/{region}/subnetworks", _LIST),
    "reservations.get": Method("GET", _ZONE + "/reservations/{reservation}"),
    "reservations.list": Method("GET", _ZONE + "/reservations", _LIST),
    "firewalls.list": Method("GET", "projects/{project}/global/firewalls", _LIST),
}


def rest_url(endpoint: str | None, base: str, path: str) -> str:
    """`base/path` (base an API's https://*.googleapis.com/... root), at `endpoint` over plain
    http when there is one (an emulator or the tests' fake)."""
    if endpoint:
        base = f"http://{endpoint}" + base.split(".googleapis.com", 1)[1]
    return f"{base}/{path}"


def authorized_session(credentials: Credentials | None) -> AuthorizedSession:
    """An HTTP session that signs every request with `credentials` (None: Application Default
    Credentials, scoped to cloud-platform)."""
    from google.auth.transport.requests import AuthorizedSession

    if credentials is None:
        import google.auth

        credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
    return AuthorizedSession(credentials)


def method_url(endpoint: str | None, method: str, params: dict[str, Any]) -> tuple[str, dict]:
    """The URL of `method` with its path parameters filled from `params`, and the query
    parameters left; a parameter the method does not take is a programming error."""
    spec = METHODS[method]
    names = {part[1:-1] for part in spec.path.split("/") if part.startswith("{")}
    missing = names - set(params)
    unknown = set(params) - names - spec.query
    if missing or unknown:
        raise TypeError(f"{method}: missing {sorted(missing)}, unknown {sorted(unknown)}")
    path = spec.path.format(**{name: quote(str(params[name]), safe="") for name in names})
    query = {key: value for key, value in params.items() if key not in names}
    return rest_url(endpoint, COMPUTE_BASE, path), query


class ComputeRest:
    """Compute v1 as one identity: one `AuthorizedSession` per thread (a requests Session is
    not shared between threads), at `endpoint` over plain http when given."""

    def __init__(self, credentials: Credentials | None, endpoint: str | None) -> None:
        self._credentials = credentials
        self.endpoint = endpoint
        self._local = threading.local()
        self._lock = threading.Lock()

    @property
    def session(self) -> AuthorizedSession:
        session = getattr(self._local, "session", None)
        if session is None:
            with self._lock:  # ADC looked up once, then shared by every thread's session
                session = authorized_session(self._credentials)
                self._credentials = session.credentials
            self._local.session = session
        return session

    def call(self, method: str, body: dict[str, Any] | None = None,
             timeout: float = DEFAULT_TIMEOUT_S, **params: Any) -> dict[str, Any]:
        """One call of `method` (`instances.get`) with its path and query parameters by the
        API's names (`project=`, `pageToken=`, `requestId=`) and a JSON `body`; the answer's
        JSON, or the API's error as google-api-core's exception for its status."""
        from google.api_core.exceptions import from_http_response

        url, query = method_url(self.endpoint, method, params)
        response = self.session.request(METHODS[method].http, url, params=query or None,
                                        json=body, timeout=timeout)
        if response.status_code >= 400:
            raise from_http_response(response)
        return response.json() if response.content else {}

    def guest_attributes(self, project: str, zone: str, instance: str, query_path: str,
                         timeout: float = DEFAULT_TIMEOUT_S) -> list[dict[str, Any]]:
        """The entries (`namespace`, `key`, `value`) an instance publishes under `query_path`
        (`instances.getGuestAttributes`); GCE answers 404 while it has published none."""
        answer = self.call("instances.getGuestAttributes", timeout=timeout, project=project,
                           zone=zone, instance=instance, queryPath=query_path)
        return (answer.get("queryValue") or {}).get("items") or []

    def pages(self, method: str, policy: RetryPolicy, **params: Any) -> list[dict[str, Any]]:
        """Every page of a list call, each page retried on its own (`each_page`)."""
        from infra.workers.retry import each_page

        def ask(token: str) -> dict[str, Any]:
            return self.call(method, **params, **({"pageToken": token} if token else {}))

        return each_page(ask, policy)

    def items(self, method: str, policy: RetryPolicy, **params: Any) -> list[dict[str, Any]]:
        """The `items` of every page of a (non-aggregated) list call."""
        return [item for page in self.pages(method, policy, **params)
                for item in page.get("items") or []]
