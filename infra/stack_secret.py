"""A random secret made once per stack and kept in its state, encrypted (a Pulumi secret).

It keys the HMAC that names the file_mounts archive (bootstrap/file_mounts.py): the name is in
the public startup script, in `ray-bootstrap-version` and in every preview, and without the key
it says nothing about a short secret file. Made like the SSH key pair (infra/ssh_keys.py): a
dynamic resource creates it once; a value made in the program would change every run.
`_RandomSecretProvider` is pickled into the state of every stack that has one: it keeps its
module and name.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, Resource, ResourceProvider

from infra.dynamic_types import MODULE

SECRET_BYTES = 32
ARCHIVE_KEY_PURPOSE = "file_mounts archive name"
"""The purpose of the secret that keys the file_mounts archive's name (the one plans show)."""


class _RandomSecretProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        # The id says nothing about the value.
        return CreateResult(
            id_=uuid.uuid4().hex,
            outs={"purpose": props["purpose"], "value": secrets.token_hex(SECRET_BYTES)},
        )


class StackSecret(Resource, module=MODULE, name="StackSecret"):
    """`value`: 64 random hex characters, a secret output, the same on every run."""

    value: pulumi.Output[str]

    def __init__(self, name: str, purpose: str, opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(additional_secret_outputs=["value"])
        )
        super().__init__(_RandomSecretProvider(), name, {"purpose": purpose, "value": None}, opts)
