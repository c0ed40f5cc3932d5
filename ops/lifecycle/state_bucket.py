"""The Cloud Storage bucket a team keeps its stacks' state in (`PULUMI_BACKEND_URL=gs://BUCKET`
or `gs://BUCKET/PREFIX`), read as the engine's own storage client reaches it: the JSON API at
storage.googleapis.com, or at $STORAGE_EMULATOR_HOST (plain http, no credentials) when that is
set (gocloud.dev/blob/gcsblob; cloud.google.com/go/storage). Credentials as the engine resolves
them for `gs://` (pkg/authhelpers/gcpauth.go): $GOOGLE_CREDENTIALS (a key's JSON), else
$GOOGLE_OAUTH_ACCESS_TOKEN, else Application Default Credentials.

Reads only: the lock files `invoke unlock` shows (ops/lifecycle/locks.py) and a stack's state
versions (`invoke state-versions`); every write is the engine's.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from ops.errors import OpsError

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
READ_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"


@dataclass(frozen=True)
class StateBucket:
    name: str
    prefix: str
    """"" or the URL's path with a trailing slash: where the backend's `.pulumi/` is."""

    @classmethod
    def of(cls, url: str) -> StateBucket:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "gs" or not parsed.netloc:
            raise ValueError(f"not a gs:// URL: {url}")
        path = parsed.path.strip("/")
        return cls(parsed.netloc, f"{path}/" if path else "")

    def names(self, prefix: str, versions: bool = False) -> list[str]:
        """The object names under `prefix` (every generation's, with `versions`)."""
        return [item["name"] for item in self.objects(prefix, versions)]

    def objects(self, prefix: str, versions: bool = False) -> list[dict[str, Any]]:
        """The object resources under `prefix`, every page (`objects.list`)."""
        found: list[dict[str, Any]] = []
        token = ""
        while True:
            query = {"prefix": prefix, **({"versions": "true"} if versions else {}),
                     **({"pageToken": token} if token else {})}
            page = json.loads(self._get(f"/storage/v1/b/{_quoted(self.name)}/o", query))
            found.extend(page.get("items") or [])
            token = page.get("nextPageToken") or ""
            if not token:
                return found

    def read(self, name: str, generation: str | None = None) -> bytes:
        """An object's bytes (`objects.get`, `alt=media`), of one `generation` if given."""
        query = {"alt": "media", **({"generation": generation} if generation else {})}
        return self._get(f"/storage/v1/b/{_quoted(self.name)}/o/{_quoted(name)}", query)

    def _get(self, path: str, query: dict[str, str]) -> bytes:
        emulator = os.environ.get(EMULATOR_ENV)
        base = (emulator if "://" in (emulator or "") else f"http://{emulator}") if emulator \
            else "https://storage.googleapis.com"
        request = urllib.request.Request(f"{base}{path}?{urllib.parse.urlencode(query)}")
        if not emulator:
            request.add_header("Authorization", f"Bearer {_token()}")
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.read()
        except urllib.error.HTTPError as error:
            raise OpsError(f"gs://{self.name}: Cloud Storage answered {error.code} "
                           f"{_message(error)}") from None
        except urllib.error.URLError as error:
            raise OpsError(f"gs://{self.name}: cannot reach Cloud Storage ({error.reason})") \
                from None


def _quoted(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _message(error: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(error.read())["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return error.reason or ""


def _token() -> str:
    """An access token as the engine finds one for `gs://` (module docstring)."""
    import google.auth
    import google.auth.transport.requests
    from google.oauth2 import service_account

    key = os.environ.get("GOOGLE_CREDENTIALS")
    if key:
        credentials: Any = service_account.Credentials.from_service_account_info(
            json.loads(key), scopes=[READ_SCOPE])
    elif os.environ.get("GOOGLE_OAUTH_ACCESS_TOKEN"):
        return os.environ["GOOGLE_OAUTH_ACCESS_TOKEN"]
    else:
        credentials, _ = google.auth.default(scopes=[READ_SCOPE])
    credentials.refresh(google.auth.transport.requests.Request())
    return str(credentials.token)
