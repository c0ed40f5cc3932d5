"""A fake OS Login API (v1) on 127.0.0.1: `users.importSshPublicKey` in the documented shapes
(developers.google.com/identity/.../oslogin/rest/v1/users/importSshPublicKey: an
ImportSshPublicKeyResponse whose loginProfile lists posixAccounts and sshPublicKeys).

`accounts` maps each account allowed to log in to the POSIX user name the fake gives it;
any other account gets 403 PERMISSION_DENIED, as for a principal without the OS Login role.
The caller is its bearer token (tests/fake_compute/identity.py): none, or one never minted,
401 UNAUTHENTICATED; a token without a scope `oslogin.users.importSshPublicKey` lists in its
discovery document (cloud-platform, compute), 403 ACCESS_TOKEN_SCOPE_INSUFFICIENT; a key put
into another account's profile, 403 PERMISSION_DENIED (a caller manages its own login profile:
https://cloud.google.com/compute/docs/oslogin/rest/v1/users/importSshPublicKey, whose `parent`
is "The unique ID for the user", and https://cloud.google.com/compute/docs/oslogin/manage-
oslogin-in-an-org for a service account's, which this fake does not serve).
Imports nothing from the project.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any
from urllib.parse import unquote

from tests.fake_compute.cloud import ApiError
from tests.fake_compute.identity import IDENTITIES, check_scopes
from tests.fake_compute.post_server import PostServer

_IMPORT = re.compile(r"^/v1/users/(?P<user>[^/:]+):importSshPublicKey$")


class FakeOsLogin:
    def __init__(self, accounts: dict[str, str]) -> None:
        self.accounts = accounts
        self.imported: list[tuple[str, str, str]] = []  # (account, projectId, key)
        self._server = PostServer(self._post)

    @property
    def endpoint(self) -> str:
        return self._server.endpoint

    def __enter__(self) -> FakeOsLogin:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    def _post(self, path: str, query: dict[str, str], raw: bytes,
              authorization: str | None) -> tuple[int, Any]:
        return self.answer(path, query, json.loads(raw or b"{}"), authorization)

    def answer(self, path: str, query: dict[str, str], body: dict[str, Any],
               authorization: str | None = None) -> tuple[int, Any]:
        match = _IMPORT.match(path)
        if match is None:
            return 404, _error(404, f"no fake route for {path}", "NOT_FOUND")
        account = unquote(match["user"])
        project = query.get("projectId", "")
        key = body.get("key", "")
        try:
            caller = IDENTITIES.who(authorization)
            check_scopes(caller, "oslogin.v1", "oslogin.users.importSshPublicKey",
                         "oslogin.googleapis.com")
        except ApiError as refused:
            return refused.status, refused.body()
        if account not in self.accounts or caller.email != account:
            return 403, _error(403, f"The caller does not have permission to log in as "
                                    f"{account}", "PERMISSION_DENIED")
        if len(key.split()) < 2:
            return 400, _error(400, "Invalid SSH key.", "INVALID_ARGUMENT")
        self.imported.append((account, project, key))
        fingerprint = hashlib.sha256(base64.b64decode(key.split()[1])).hexdigest()
        username = self.accounts[account]
        return 200, {"loginProfile": {
            "name": account,
            "posixAccounts": [{
                "primary": True, "username": username, "uid": "1001", "gid": "1001",
                "homeDirectory": f"/home/{username}", "shell": "/bin/bash", "gecos": "",
                "systemId": "", "accountId": project, "operatingSystemType": "LINUX",
                "name": f"users/{account}/projects/{project}",
            }],
            "sshPublicKeys": {fingerprint: {
                "key": key, "fingerprint": fingerprint,
                "name": f"users/{account}/sshPublicKeys/{fingerprint}"}},
        }}


def _error(code: int, message: str, status: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}
