"""HashiCorp Vault's transit secrets engine on 127.0.0.1, as pulumi's `hashivault://KEY`
secrets provider reaches it (gocloud.dev/secrets/hashivault: VAULT_SERVER_URL or VAULT_ADDR,
and VAULT_SERVER_TOKEN or VAULT_TOKEN; its keeper writes `transit/encrypt/KEY` and
`transit/decrypt/KEY` through Vault's Go API client, which sends PUT).

What is served, from https://developer.hashicorp.com/vault/api-docs/secret/transit:
- `POST|PUT /v1/transit/encrypt/:name`, `{"plaintext": BASE64}` -> `{"data": {"ciphertext":
  "vault:v1:...", "key_version": 1}}`. A missing key is made on first use (the endpoint's
  `create` capability "upserts" it), as a root token may;
- `POST|PUT /v1/transit/decrypt/:name`, `{"ciphertext": "vault:v1:..."}` -> `{"data":
  {"plaintext": BASE64}}`. Each key is its own AES-256-GCM key (transit's default type,
  aes256-gcm96), so ciphertext of another key fails authentication.

Refused as Vault refuses (https://developer.hashicorp.com/vault/api-docs#http-status-codes,
errors as `{"errors": [...]}`): no token or one it never issued, 403 "permission denied";
plaintext that is not base64, ciphertext without the `vault:v` prefix, decrypting under a key
that does not exist ("encryption key not found"), and ciphertext the key did not make
("cipher: message authentication failed"), 400; any other path, 404.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
import threading
from email.message import Message
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tests.fakes.compute.json_server import JsonServer

PREFIX = "vault:v1:"


class VaultError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class FakeVault:
    """Start as a context manager; `address` is what VAULT_SERVER_URL takes, `token` the only
    token it accepts. `calls` records (operation, key) per answered call."""

    def __init__(self) -> None:
        self.token = "hvs." + secrets.token_urlsafe(24)
        self.keys: dict[str, bytes] = {}
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._server = JsonServer(self._serve)

    @property
    def address(self) -> str:
        return f"http://{self._server.endpoint}"

    def env(self) -> dict[str, str]:
        """The environment pulumi's hashivault provider reads."""
        return {"VAULT_SERVER_URL": self.address, "VAULT_SERVER_TOKEN": self.token}

    def __enter__(self) -> FakeVault:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    def _serve(self, verb: str, path: str, query: dict[str, str], raw: bytes,
               headers: Message) -> tuple[int, Any]:
        token = headers.get("X-Vault-Token")
        bearer = headers.get("Authorization", "")
        if token is None and bearer.startswith("Bearer "):
            token = bearer[len("Bearer "):]
        try:
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                raise VaultError(400, "failed to parse JSON input") from None
            data = self.answer(verb, path, token, body if isinstance(body, dict) else {})
        except VaultError as error:
            return error.status, {"errors": [str(error)]}
        return 200, {"request_id": secrets.token_hex(8), "lease_id": "", "renewable": False,
                     "lease_duration": 0, "data": data, "wrap_info": None, "warnings": None,
                     "auth": None}

    def answer(self, method: str, path: str, token: str | None, body: dict[str, Any]
               ) -> dict[str, Any]:
        if method not in ("POST", "PUT"):
            raise VaultError(405, "unsupported operation")
        parts = path.split("/")
        if len(parts) != 5 or parts[:3] != ["", "v1", "transit"] or \
                parts[3] not in ("encrypt", "decrypt") or not parts[4]:
            raise VaultError(404, "no handler for route")
        if token != self.token:
            raise VaultError(403, "permission denied")
        operation, name = parts[3], parts[4]
        with self._lock:
            if operation == "encrypt":
                try:
                    plain = base64.b64decode(str(body.get("plaintext", "")), validate=True)
                except binascii.Error:
                    raise VaultError(400, "failed to base64-decode plaintext") from None
                key = self.keys.setdefault(name, AESGCM.generate_key(bit_length=256))
                nonce = os.urandom(12)
                sealed = nonce + AESGCM(key).encrypt(nonce, plain, None)
                self.calls.append((operation, name))
                return {"ciphertext": PREFIX + base64.b64encode(sealed).decode(),
                        "key_version": 1}
            ciphertext = str(body.get("ciphertext", ""))
            if name not in self.keys:
                raise VaultError(400, "encryption key not found")
            if not ciphertext.startswith(PREFIX):
                raise VaultError(400, "invalid ciphertext: no prefix")
            try:
                sealed = base64.b64decode(ciphertext[len(PREFIX):], validate=True)
                plain = AESGCM(self.keys[name]).decrypt(sealed[:12], sealed[12:], None)
            except (binascii.Error, InvalidTag, ValueError):
                raise VaultError(400, "cipher: message authentication failed") from None
            self.calls.append((operation, name))
            return {"plaintext": base64.b64encode(plain).decode()}


_shared: FakeVault | None = None
_shared_lock = threading.Lock()


def shared_vault() -> FakeVault:
    """One fake Vault for this process (a test worker), started on first use and left to die
    with it: the engine workspaces' stacks keep their data keys in it."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = FakeVault().__enter__()
        return _shared
