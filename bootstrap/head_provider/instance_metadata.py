"""The node's own GCE services, from the node, standard library only: its metadata attributes,
its service account's token and its guest attributes (the metadata server), and JSON over HTTP
with retries for the Google APIs. The head's daemon (bootstrap/autostop.py) and its node
provider's spend check use them.

Local mode (the local cluster, the tests): RAY_BOOTSTRAP_METADATA_DIR holds one file per
attribute and RAY_BOOTSTRAP_STATUS_DIR the guest attributes written; RAY_BOOTSTRAP_METADATA_URL
replaces the metadata server's address.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

HTTP_TIMEOUT = 30.0


class ApiError(RuntimeError):
    """An HTTP call that failed for good (after retries on 429/5xx)."""


def http_json(url: str, method: str = "GET", body: Any = None,
              headers: dict[str, str] | None = None, tries: int = 4) -> Any:
    """One JSON request; 429 and 5xx are retried with backoff, other errors raise ApiError."""
    data = json.dumps(body).encode() if body is not None else None
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    for attempt in range(tries):
        request = urllib.request.Request(url, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as answer:
                raw = answer.read()
                return json.loads(raw) if raw else {}
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace")
            if (exc.code == 429 or exc.code >= 500) and attempt + 1 < tries:
                time.sleep(min(2 ** attempt, 10))
                continue
            raise ApiError(f"{method} {url}: HTTP {exc.code} {detail}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            if attempt + 1 < tries:
                time.sleep(min(2 ** attempt, 10))
                continue
            raise ApiError(f"{method} {url}: {exc}") from None
    raise ApiError(f"{method} {url}: no answer")


class Metadata:
    """Metadata attributes and the service account's token: files in local mode, else the
    metadata server."""

    def __init__(self, directory: str | None = None, url: str | None = None) -> None:
        self.directory = directory
        self.url = (url or "http://metadata.google.internal/computeMetadata/v1") + "/instance"

    @classmethod
    def from_environment(cls) -> Metadata:
        return cls(os.environ.get("RAY_BOOTSTRAP_METADATA_DIR") or None,
                   os.environ.get("RAY_BOOTSTRAP_METADATA_URL") or None)

    def attribute(self, key: str) -> str | None:
        if self.directory:
            path = Path(self.directory) / key
            return path.read_text() if path.is_file() else None
        request = urllib.request.Request(f"{self.url}/attributes/{key}",
                                         headers={"Metadata-Flavor": "Google"})
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as answer:
                return answer.read().decode()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise ApiError(f"metadata {key}: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ApiError(f"metadata {key}: {exc}") from None

    def token(self) -> str:
        """The instance's service-account token: in local mode the metadata server's answer
        kept in `service-accounts/default/token` under the folder (no attribute key has a
        `/`), else asked of the server."""
        if self.directory:
            path = Path(self.directory) / "service-accounts" / "default" / "token"
            try:
                return json.loads(path.read_text())["access_token"]
            except (OSError, ValueError, KeyError) as exc:
                raise ApiError(f"metadata token {path}: {exc}") from None
        answer = http_json(f"{self.url}/service-accounts/default/token",
                           headers={"Metadata-Flavor": "Google"})
        return answer["access_token"]

    def report_attribute(self, key: str, value: str) -> None:
        """Write a guest attribute (`namespace/key`): a file in local mode (under
        RAY_BOOTSTRAP_STATUS_DIR, else `guest-attributes` beside the metadata folder), else
        the metadata server."""
        status_dir = os.environ.get("RAY_BOOTSTRAP_STATUS_DIR")
        if self.directory or status_dir:
            base = Path(status_dir or Path(self.directory or ".").parent / "guest-attributes")
            path = base / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(value)
            return
        request = urllib.request.Request(
            f"{self.url}/guest-attributes/{key}", data=value.encode(),
            method="PUT", headers={"Metadata-Flavor": "Google"})
        try:
            urllib.request.urlopen(request, timeout=HTTP_TIMEOUT).close()
        except (urllib.error.URLError, OSError) as exc:
            raise ApiError(f"guest attribute {key}: {exc}") from None
