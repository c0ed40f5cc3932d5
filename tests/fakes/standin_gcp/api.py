"""The Google APIs the stand-in calls, over plain HTTP/JSON, at the provider's endpoints.

pulumi-gcp's own provider config names them: `computeCustomEndpoint`,
`tpuV2CustomEndpoint`, `iamCustomEndpoint`, `resourceManagerCustomEndpoint`,
`serviceUsageCustomEndpoint`, `secretManagerCustomEndpoint`, `storageCustomEndpoint` (each a
base URL ending in the API version, as the real provider takes it), else the environment
variable the Terraform provider reads for it (`GOOGLE_COMPUTE_CUSTOM_ENDPOINT`, ...: each
service's product.go; IAM has none upstream, so `GOOGLE_IAM_CUSTOM_ENDPOINT` is the stand-in's
own, for explicit providers), else the real googleapis.com URL. Cloud Storage's media uploads
go to the same host under `/upload/` (the JSON API's upload path).

Every call carries `Authorization: Bearer` with the provider's `accessToken`, else
`GOOGLE_OAUTH_ACCESS_TOKEN` (the Terraform provider's variable for a bare token), when set.

Transient faults are retried as the Terraform provider's HTTP client retries them: its
`retryTransport` wraps every API client (google/transport/config.go) and `SendRequest` retries
again on the same predicates (google/transport/transport.go, DefaultRequestTimeout 5 minutes),
both judging with `defaultErrorRetryPredicates` (google/transport/error_retry_predicates.go,
terraform-provider-google e03b762):
- network faults: a timeout (`isNetworkTimeoutError`), a connection reset by peer
  (`isConnectionResetNetworkError`), an answer cut short (`isIoEOFError`: io.ErrUnexpectedEOF).
  A connection closed before any answer is Go's plain `EOF`, which none of them matches; Go's
  own transport resends only a request that is idempotent (a GET: net/http's
  `Request.isReplayable`), so a lost answer to an insert fails the call;
- 429, 500, 502, 503 (`isCommonRetryableErrorCode`);
- 409 whose body says `operationInProgress` (`is409OperationInProgressError`);
- 400 `resourceNotReady` naming networks or subnetworks (`isNetworkUnreadyError`,
  `isSubnetworkUnreadyError`);
- 403 whose message is a per-minute quota, "Quota exceeded for quota metric '...' and limit
  '... per minute' of service" (`is403QuotaExceededPerMinuteError`), or whose ErrorInfo
  reason is CONCURRENT_OPERATIONS_QUOTA_EXCEEDED (`is403ConcurrentOperationsQuotaError`). A
  403 `rateLimitExceeded` in other words is not retried.
The wait between attempts grows as the transport's does (Fibonacci: 0.5 s, 1 s, 1.5 s, 2.5 s,
...); `Retry-After` is not read (retry_transport.go never looks at it).

Operations are polled with GET as the provider polls them (compute_operation.go `QueryOp`:
zoneOperations.get, regionOperations.get or globalOperations.get; tpgresource/
common_operation.go `CommonRefreshFunc` retries a 404 on the operation).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

DEFAULT_ENDPOINTS = {
    "compute": "https://compute.googleapis.com/compute/v1/",
    "tpuV2": "https://tpu.googleapis.com/v2/",
    "iam": "https://iam.googleapis.com/v1/",
    "resourceManager": "https://cloudresourcemanager.googleapis.com/v1/",
    "serviceUsage": "https://serviceusage.googleapis.com/v1/",
    "secretManager": "https://secretmanager.googleapis.com/v1/",
    "storage": "https://storage.googleapis.com/storage/v1/",
}
ENDPOINT_ENV = {
    "compute": "GOOGLE_COMPUTE_CUSTOM_ENDPOINT",
    "tpuV2": "GOOGLE_TPU_V2_CUSTOM_ENDPOINT",
    "iam": "GOOGLE_IAM_CUSTOM_ENDPOINT",
    "resourceManager": "GOOGLE_RESOURCE_MANAGER_CUSTOM_ENDPOINT",
    "serviceUsage": "GOOGLE_SERVICE_USAGE_CUSTOM_ENDPOINT",
    "secretManager": "GOOGLE_SECRET_MANAGER_CUSTOM_ENDPOINT",
    "storage": "GOOGLE_STORAGE_CUSTOM_ENDPOINT",
}
TOKEN_ENV = "GOOGLE_OAUTH_ACCESS_TOKEN"
OPERATION_WAIT_S = 120.0
REQUEST_TIMEOUT_S = 300.0  # transport.go DefaultRequestTimeout
POLL_S = 0.05
_QUOTA_PER_MINUTE = re.compile(r"Quota exceeded for quota metric '(?P<metric>.*)' and limit "
                               r"'(?P<limit>.* per minute)' of service")


class ApiError(Exception):
    def __init__(self, status: int, message: str, body: str = "") -> None:
        super().__init__(f"googleapi: Error {status}: {message}")
        self.status = status
        self.body = body


class TransportError(ApiError):
    """No HTTP answer: the call's URL and Go's error for it (`Post "<url>": EOF`)."""

    def __init__(self, verb: str, url: str, reason: str, retryable: bool) -> None:
        Exception.__init__(self, f'{verb.title()} "{url}": {reason}')
        self.status = 0
        self.body = ""
        self.retryable = retryable


def _transport_error(request: urllib.request.Request, error: Exception) -> TransportError:
    """Python's network error as Go's, and whether the provider's predicates retry it."""
    verb, url = request.get_method(), request.full_url
    if isinstance(error, urllib.error.URLError):
        error = error.reason if isinstance(error.reason, Exception) else error
    if isinstance(error, http.client.RemoteDisconnected):  # closed before any answer
        return TransportError(verb, url, "EOF", retryable=verb == "GET")
    if isinstance(error, ConnectionResetError):
        return TransportError(verb, url, "read: connection reset by peer", retryable=True)
    if isinstance(error, http.client.IncompleteRead):
        return TransportError(verb, url, "unexpected EOF", retryable=True)
    if isinstance(error, TimeoutError | socket.timeout):
        return TransportError(verb, url, "i/o timeout", retryable=True)
    return TransportError(verb, url, str(error), retryable=False)


def retryable(error: ApiError) -> bool:
    """`defaultErrorRetryPredicates` (module docstring)."""
    if isinstance(error, TransportError):
        return error.retryable
    body = error.body
    if error.status in (429, 500, 502, 503):
        return True
    if error.status == 409:
        return "operationInProgress" in body
    if error.status == 400:
        return "resourceNotReady" in body and "networks" in body
    if error.status == 403:
        return bool(_QUOTA_PER_MINUTE.search(body)) or "CONCURRENT_OPERATIONS_QUOTA_EXCEEDED" \
            in body
    return False


class Apis:
    """One base URL per API, from the provider's configuration."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.endpoints = {
            api: str(config.get(f"{api}CustomEndpoint") or os.environ.get(ENDPOINT_ENV[api])
                     or default)
            for api, default in DEFAULT_ENDPOINTS.items()
        }
        self.token = str(config.get("accessToken") or os.environ.get(TOKEN_ENV) or "")

    def _headers(self, content_type: str) -> dict[str, str]:
        auth = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return {"Content-Type": content_type, **auth}

    def call(self, api: str, verb: str, path: str, body: Any = None,
             query: dict[str, str] | None = None) -> Any:
        url = self.endpoints[api].rstrip("/") + "/" + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        return self._send(urllib.request.Request(url, data=data, method=verb,
                                                 headers=self._headers("application/json")))

    def upload(self, bucket: str, name: str, data: bytes, content_type: str) -> Any:
        """Cloud Storage's simple media upload (`objects.insert`, `uploadType=media`)."""
        base = urllib.parse.urlsplit(self.endpoints["storage"])
        url = urllib.parse.urlunsplit((
            base.scheme, base.netloc,
            f"/upload{base.path.rstrip('/')}/b/{urllib.parse.quote(bucket, safe='')}/o",
            urllib.parse.urlencode({"uploadType": "media", "name": name}), ""))
        return self._send(urllib.request.Request(url, data=data, method="POST",
                                                 headers=self._headers(content_type)))

    def _send(self, request: urllib.request.Request) -> Any:
        """One call, retried as the provider retries (module docstring)."""
        give_up_at = time.monotonic() + REQUEST_TIMEOUT_S
        pause, following = 0.5, 0.5
        while True:
            try:
                return self._once(request)
            except ApiError as error:
                if not retryable(error) or time.monotonic() + pause > give_up_at:
                    raise
            time.sleep(pause)
            pause, following = pause + following, pause

    @staticmethod
    def _once(request: urllib.request.Request) -> Any:
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            try:
                message = json.loads(detail)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = detail
            raise ApiError(error.code, message, detail) from None
        except (OSError, http.client.HTTPException) as error:
            raise _transport_error(request, error) from None
        return json.loads(raw) if raw else {}

    def get_or_none(self, api: str, path: str) -> Any:
        """GET, with a 404 as None (the resource is gone)."""
        try:
            return self.call(api, "GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def wait_compute(self, operation: dict[str, Any], project: str) -> None:
        """Poll a zonal, regional or global Compute operation (GET) until DONE; its error is
        raised (module docstring)."""
        deadline = time.monotonic() + OPERATION_WAIT_S
        while operation.get("status") != "DONE":
            if time.monotonic() > deadline:
                raise ApiError(504, f"operation {operation.get('name')} did not finish")
            time.sleep(POLL_S)
            zone = str(operation.get("zone") or "").rsplit("/", 1)[-1]
            region = str(operation.get("region") or "").rsplit("/", 1)[-1]
            where = f"zones/{zone}" if zone else f"regions/{region}" if region else "global"
            try:
                operation = self.call(
                    "compute", "GET", f"projects/{project}/{where}/operations/{operation['name']}")
            except ApiError as error:
                if error.status != 404:
                    raise
        if operation.get("error"):
            errors = operation["error"].get("errors") or [{}]
            raise ApiError(int(operation.get("httpErrorStatusCode") or 400),
                           str(errors[0].get("message") or errors[0].get("code")))

    def wait_tpu(self, operation: dict[str, Any]) -> None:
        """Poll a TPU long-running operation until done; its error is raised."""
        deadline = time.monotonic() + OPERATION_WAIT_S
        while not operation.get("done"):
            if time.monotonic() > deadline:
                raise ApiError(504, f"operation {operation.get('name')} did not finish")
            time.sleep(0.05)
            operation = self.call("tpuV2", "GET", operation["name"])
        if operation.get("error"):
            raise ApiError(400, str(operation["error"].get("message")))

