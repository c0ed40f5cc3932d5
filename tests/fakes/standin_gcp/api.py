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
"""

from __future__ import annotations

import json
import os
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


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"googleapi: Error {status}: {message}")
        self.status = status


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
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            try:
                message = json.loads(detail)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = detail
            raise ApiError(error.code, message) from None
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
        """Poll a zonal or global Compute operation until DONE; its error is raised."""
        deadline = time.monotonic() + OPERATION_WAIT_S
        while operation.get("status") != "DONE":
            if time.monotonic() > deadline:
                raise ApiError(504, f"operation {operation.get('name')} did not finish")
            zone = str(operation.get("zone") or "").rsplit("/", 1)[-1]
            where = f"zones/{zone}" if zone else "global"
            operation = self.call(
                "compute", "POST",
                f"projects/{project}/{where}/operations/{operation['name']}/wait")
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
