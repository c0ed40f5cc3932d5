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
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fake_compute.cloud import ApiError
from tests.fake_compute.identity import IDENTITIES, check_scopes

_IMPORT = re.compile(r"^/v1/users/(?P<user>[^/:]+):importSshPublicKey$")


class FakeOsLogin:
    def __init__(self, accounts: dict[str, str]) -> None:
        self.accounts = accounts
        self.imported: list[tuple[str, str, str]] = []  # (account, projectId, key)
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,),
                                        daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._http.server_address[:2]
        return f"{host}:{port}"

    def __enter__(self) -> FakeOsLogin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

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

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, payload = fake.answer(url.path, query, body,
                                              self.headers.get("Authorization"))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def _error(code: int, message: str, status: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}
