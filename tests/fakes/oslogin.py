"""A fake OS Login API (v1) on 127.0.0.1, with the OAuth token endpoint its callers' credentials
refresh at and the metadata server's `oslogin/users` view a VM's guest agent reads.

Driven through the real clients: google-auth's Application Default Credentials (the session's
user, tests/conftest.py, or another account's file written by `credentials_file`, refreshing
at this server's `/token`) and google-api-python-client with the `oslogin` v1 discovery
document it ships. Callers and their scopes are the one token registry every fake shares
(tests/fakes/compute/identity.py). Imports nothing from the project.

What it refuses, as Google does:
- A call without a valid access token: 401 UNAUTHENTICATED; a token without one of the
  method's scopes (the discovery document's `scopes`): 403 PERMISSION_DENIED, reason
  ACCESS_TOKEN_SCOPE_INSUFFICIENT (both worded by tests/fakes/compute/identity.py, with
  Google's error bodies: https://cloud.google.com/apis/design/errors#http_mapping).
- A call on another account's profile (`users/{user}` not the caller): 403 PERMISSION_DENIED.
  Keys go into "your Google Account" through the OS Login API; only an administrator adds keys
  to other users, through the Directory API
  (https://cloud.google.com/compute/docs/connect/add-ssh-keys#os-login).
- A key that is not `type base64` of a known type: 400 INVALID_ARGUMENT; a key name that is not
  in the profile: 404 NOT_FOUND.
Shapes (https://cloud.google.com/compute/docs/oslogin/rest/v1/users): `importSshPublicKey`
answers an ImportSshPublicKeyResponse whose LoginProfile maps each key's SHA-256 fingerprint
(hex, as `gcloud compute os-login ssh-keys` shows it) to an SshPublicKey with `key`,
`expirationTimeUsec`, `fingerprint` and `name` (`users/{user}/sshPublicKeys/{fingerprint}`);
the first import for a project makes the account's POSIX account there (`posixAccounts`).
`sshPublicKeys.patch` changes only `expirationTimeUsec` (`updateMask`), as
`gcloud compute os-login ssh-keys update --ttl` does; `sshPublicKeys.delete` answers `{}`.

The metadata view a VM's guest agent reads (header `Metadata-Flavor: Google`):
`/computeMetadata/v1/oslogin/users?username=` lists an account's profile with every key,
expired or not, and `oslogin/authorize?email=&policy=login` says whether the account may log
in, i.e. has the OS Login role on the project
(https://cloud.google.com/compute/docs/oslogin/set-up-oslogin#grant-iam-roles): the role is
checked at login, not when a key is imported into one's own profile. The guest agent's
AuthorizedKeysCommand asks both and prints only unexpired keys
(tests/fakes/oslogin_authorized_keys.py,
after src/authorized_keys/authorized_keys.cc and ParseJsonToSshKeys in src/oslogin_utils.cc of
github.com/GoogleCloudPlatform/guest-oslogin).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from tests.fakes.compute.cloud import ApiError
from tests.fakes.compute.identity import CLOUD_PLATFORM, IDENTITIES, adc_file, check_scopes
from tests.fakes.compute.json_server import JsonServer

KEY_TYPES = {"ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
             "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com",
             "sk-ecdsa-sha2-nistp256@openssh.com"}

_ROUTES = [
    ("GET", re.compile(r"^/v1/users/(?P<user>[^/:]+)/loginProfile$"), "get_login_profile",
     "oslogin.users.getLoginProfile"),
    ("POST", re.compile(r"^/v1/users/(?P<user>[^/:]+):importSshPublicKey$"), "import_key",
     "oslogin.users.importSshPublicKey"),
    ("PATCH", re.compile(r"^/v1/users/(?P<user>[^/:]+)/sshPublicKeys/(?P<fp>[^/]+)$"),
     "patch_key", "oslogin.users.sshPublicKeys.patch"),
    ("DELETE", re.compile(r"^/v1/users/(?P<user>[^/:]+)/sshPublicKeys/(?P<fp>[^/]+)$"),
     "delete_key", "oslogin.users.sshPublicKeys.delete"),
]

Answer = tuple[int, Any]


def fingerprint(key: str) -> str:
    """SHA-256 of the key's blob, in hex."""
    return hashlib.sha256(base64.b64decode(key.split()[1])).hexdigest()


class FakeOsLogin:
    """`accounts` maps each Google account to the POSIX user name it gets; `login_role` names
    those with the OS Login role on the project (all of them when not given)."""

    def __init__(self, accounts: dict[str, str], login_role: set[str] | None = None) -> None:
        self.accounts = accounts
        self.login_role = set(accounts) if login_role is None else login_role
        self.keys: dict[str, dict[str, dict[str, str]]] = {}  # account -> fingerprint -> key
        self.projects: dict[str, set[str]] = {}  # account -> projects with a POSIX account
        self.calls: list[tuple[str, str, str]] = []  # (caller, method, path)
        self._lock = threading.Lock()
        self._server = JsonServer(self._serve)

    @property
    def endpoint(self) -> str:
        return self._server.endpoint

    def __enter__(self) -> FakeOsLogin:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    # --- what a test sets up or reads -------------------------------------------------------

    def credentials_file(self, account: str, folder: Path,
                         scopes: tuple[str, ...] = (CLOUD_PLATFORM,)) -> Path:
        """Application Default Credentials for `account` that refresh here: an
        `external_account_authorized_user` file (tests/fakes/compute/identity.py `adc_file`),
        for GOOGLE_APPLICATION_CREDENTIALS. Its tokens carry `scopes`: what the user consented
        to at login (cloud-platform for gcloud's)."""
        refresh = IDENTITIES.refresh_token(f"user:{account}", set(scopes))
        path = folder / f"adc-{account}.json"
        path.write_text(json.dumps(adc_file(f"http://{self.endpoint}/token", refresh)))
        return path

    def seed(self, account: str, key: str, project: str, expiry_usec: int | None = None) -> str:
        """A key already in the profile (e.g. imported by an older version); its fingerprint."""
        with self._lock:
            return self._store(account, key, project, expiry_usec)

    def expire(self, account: str, key_fingerprint: str) -> None:
        """Move a key's expiry into the past, as time would."""
        with self._lock:
            self.keys[account][key_fingerprint]["expirationTimeUsec"] = str(
                int((time.time() - 60) * 1e6))

    def profile_keys(self, account: str) -> dict[str, dict[str, str]]:
        with self._lock:
            return {fp: dict(entry) for fp, entry in self.keys.get(account, {}).items()}

    # --- the API -----------------------------------------------------------------------------

    def answer(self, verb: str, path: str, query: dict[str, str], headers: Any,
               body: dict[str, Any]) -> Answer:
        if path.startswith("/computeMetadata/v1/oslogin/"):
            if headers.get("Metadata-Flavor") != "Google":
                return 403, "Missing Metadata-Flavor:Google header"
            if path.endswith("/users"):
                return self._metadata_users(query)
            if path.endswith("/authorize"):
                return 200, {"success": query.get("email") in self.login_role
                             and query.get("policy") == "login"}
        for route_verb, pattern, method, method_id in _ROUTES:
            match = pattern.match(path) if route_verb == verb else None
            if match is None:
                continue
            try:
                token = IDENTITIES.who(headers.get("Authorization"))
                check_scopes(token, "oslogin.v1", method_id, "oslogin.googleapis.com")
            except ApiError as refused:
                self.calls.append(("", method, path))
                return refused.status, refused.body()
            caller = token.email
            self.calls.append((caller, method, path))
            user = unquote(match["user"])
            if user != caller:
                return _error(403, f"The caller does not have permission to access the "
                                   f"profile of {user}", "PERMISSION_DENIED")
            with self._lock:
                return getattr(self, f"_{method}")(user, match.groupdict(), query, body)
        return _error(404, f"no fake route for {verb} {path}", "NOT_FOUND")

    def _get_login_profile(self, user: str, _p: dict[str, str], query: dict[str, str],
                           _b: dict[str, Any]) -> Answer:
        return 200, self._profile(user, query.get("projectId", ""))

    def _import_key(self, user: str, _p: dict[str, str], query: dict[str, str],
                    body: dict[str, Any]) -> Answer:
        key = str(body.get("key") or "")
        if not _valid_key(key):
            return _error(400, "Invalid SSH key.", "INVALID_ARGUMENT")
        expiry = body.get("expirationTimeUsec")
        project = query.get("projectId", "")
        self._store(user, key, project, int(expiry) if expiry else None)
        return 200, {"loginProfile": self._profile(user, project)}

    def _patch_key(self, user: str, params: dict[str, str], query: dict[str, str],
                   body: dict[str, Any]) -> Answer:
        entry = self.keys.get(user, {}).get(unquote(params["fp"]))
        if entry is None:
            return _error(404, "Requested entity was not found.", "NOT_FOUND")
        if query.get("updateMask") != "expirationTimeUsec":
            return _error(400, "Only expirationTimeUsec can be updated.", "INVALID_ARGUMENT")
        entry["expirationTimeUsec"] = str(int(body["expirationTimeUsec"]))
        return 200, dict(entry)

    def _delete_key(self, user: str, params: dict[str, str], _q: dict[str, str],
                    _b: dict[str, Any]) -> Answer:
        if self.keys.get(user, {}).pop(unquote(params["fp"]), None) is None:
            return _error(404, "Requested entity was not found.", "NOT_FOUND")
        return 200, {}

    def _metadata_users(self, query: dict[str, str]) -> Answer:
        with self._lock:
            for account, username in self.accounts.items():
                if username == query.get("username") and self.projects.get(account):
                    project = sorted(self.projects[account])[0]
                    return 200, {"loginProfiles": [self._profile(account, project)]}
        return 404, "not found"

    def _store(self, account: str, key: str, project: str, expiry_usec: int | None) -> str:
        found = fingerprint(key)
        entry = {"key": key, "fingerprint": found,
                 "name": f"users/{account}/sshPublicKeys/{found}"}
        if expiry_usec is not None:
            entry["expirationTimeUsec"] = str(expiry_usec)
        self.keys.setdefault(account, {})[found] = entry
        if project:
            self.projects.setdefault(account, set()).add(project)
        return found

    def _profile(self, account: str, project: str) -> dict[str, Any]:
        username = self.accounts[account]
        profile: dict[str, Any] = {
            "name": account,
            "sshPublicKeys": {fp: dict(e) for fp, e in self.keys.get(account, {}).items()}}
        if project in self.projects.get(account, set()):
            profile["posixAccounts"] = [{
                "primary": True, "username": username, "uid": "1001", "gid": "1001",
                "homeDirectory": f"/home/{username}", "shell": "/bin/bash", "gecos": "",
                "systemId": "", "accountId": project, "operatingSystemType": "LINUX",
                "name": f"users/{account}/projects/{project}"}]
        return profile

    def _serve(self, verb: str, path: str, query: dict[str, str], raw: bytes,
               headers: Any) -> Answer:
        if (verb, path) == ("POST", "/token"):  # Google's OAuth token endpoint
            return IDENTITIES.refresh_grant(raw)
        return self.answer(verb, path, query, headers, json.loads(raw or b"{}"))


def _valid_key(key: str) -> bool:
    parts = key.split()
    if len(parts) < 2 or parts[0] not in KEY_TYPES:
        return False
    try:
        base64.b64decode(parts[1], validate=True)
    except binascii.Error:
        return False
    return True


def _error(code: int, message: str, status: str) -> Answer:
    return code, {"error": {"code": code, "message": message, "status": status}}
