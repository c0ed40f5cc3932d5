"""The Cloud Storage bucket a team keeps its stacks' state in (`PULUMI_BACKEND_URL=gs://BUCKET`
or `gs://BUCKET/PREFIX`), read as the engine's own storage client reaches it: the JSON API at
storage.googleapis.com, or at $STORAGE_EMULATOR_HOST (plain http, no credentials) when that is
set (gocloud.dev/blob/gcsblob; cloud.google.com/go/storage). Credentials as the engine resolves
them for `gs://` (pkg/authhelpers/gcpauth.go): $GOOGLE_CREDENTIALS (a key's JSON), else
$GOOGLE_OAUTH_ACCESS_TOKEN, else Application Default Credentials.

Read: the lock files `invoke unlock` shows (ops/lifecycle/locks.py). Made: the bucket itself
(`invoke state-bucket`). Every write of the state is the engine's.
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
WRITE_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"
RETRY_DEADLINE_S = 60.0  # how long one call may keep retrying transient answers


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
        return self._call("GET", path, query)

    def _call(self, verb: str, path: str, query: dict[str, str],
              body: dict[str, Any] | None = None) -> bytes:
        emulator = os.environ.get(EMULATOR_ENV)
        base = (emulator if "://" in (emulator or "") else f"http://{emulator}") if emulator \
            else "https://storage.googleapis.com"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{base}{path}?{urllib.parse.urlencode(query)}",
                                         data=data, method=verb)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if not emulator:
            request.add_header("Authorization", f"Bearer {_token(write=data is not None)}")
        from google.api_core import exceptions

        from infra.workers.retry import RetryPolicy, call_with_retry

        def once() -> bytes:
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    return answer.read()
            except urllib.error.HTTPError as error:  # its headers carry any Retry-After
                raise exceptions.from_http_status(error.code, _message(error),
                                                  response=error) from None

        try:  # 429 and 5xx retried as the worker groups' calls are (infra/workers/retry.py)
            return call_with_retry(once, RetryPolicy(deadline_s=RETRY_DEADLINE_S))
        except exceptions.GoogleAPICallError as error:
            raise OpsError(f"gs://{self.name}: Cloud Storage answered {error.code} "
                           f"{error.message}") from None
        except urllib.error.URLError as error:
            raise OpsError(f"gs://{self.name}: cannot reach Cloud Storage ({error.reason})") \
                from None


    def create(self, project: str, location: str) -> str:
        """Make the bucket for a team's state (`invoke state-bucket`): object versioning on
        (every state write keeps the one before: a stack rolls back to any of them), uniform
        bucket-level access (IAM alone decides who reads it) and public access prevention
        enforced (the state holds the stacks' outputs). A bucket of that name already there is
        checked instead; what it lacks is one line. What was done, for the user."""
        wanted = {"versioning": {"enabled": True},
                  "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True},
                                       "publicAccessPrevention": "enforced"}}
        try:
            self._call("POST", "/storage/v1/b", {"project": project},
                       {"name": self.name, "location": location, **wanted})
            return f"created gs://{self.name} in {location} (project {project})"
        except OpsError as exc:
            if " 409 " not in str(exc):
                raise
        found = json.loads(self._get(f"/storage/v1/b/{_quoted(self.name)}", {}))
        iam = found.get("iamConfiguration") or {}
        missing = [what for what, there in (
            ("object versioning", (found.get("versioning") or {}).get("enabled")),
            ("uniform bucket-level access",
             (iam.get("uniformBucketLevelAccess") or {}).get("enabled")),
            ("public access prevention", iam.get("publicAccessPrevention") == "enforced"),
        ) if not there]
        if missing:
            raise OpsError(f"gs://{self.name} exists without {', '.join(missing)}: turn "
                           f"{'it' if len(missing) == 1 else 'them'} on (`gcloud storage "
                           f"buckets update gs://{self.name} --versioning "
                           "--uniform-bucket-level-access --public-access-prevention`) or "
                           "choose another name")
        return f"gs://{self.name} is there already, set up as it should be"


def _quoted(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _message(error: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(error.read())["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return error.reason or ""


def _token(write: bool = False) -> str:
    """An access token as the engine finds one for `gs://` (module docstring)."""
    import google.auth
    import google.auth.transport.requests
    from google.oauth2 import service_account

    key = os.environ.get("GOOGLE_CREDENTIALS")
    if key:
        credentials: Any = service_account.Credentials.from_service_account_info(
            json.loads(key), scopes=[WRITE_SCOPE if write else READ_SCOPE])
    elif os.environ.get("GOOGLE_OAUTH_ACCESS_TOKEN"):
        return os.environ["GOOGLE_OAUTH_ACCESS_TOKEN"]
    else:
        credentials, _ = google.auth.default(scopes=[WRITE_SCOPE if write else READ_SCOPE])
    credentials.refresh(google.auth.transport.requests.Request())
    return str(credentials.token)
