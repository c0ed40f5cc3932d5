"""The cluster's SSH key pair: generated once and kept in Pulumi state, or the user's own.

A key generated in the program itself would change on every run; a dynamic resource creates
it once and state keeps it (the private half encrypted as a secret). No provider plugin needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pulumi
from pulumi.dynamic import CreateResult, Resource, ResourceProvider

from infra.component_options import waits_for
from infra.dynamic_types import MODULE, legacy_aliases
from model.config.errors import ConfigError
from model.config.local_paths import expand_local_path

if TYPE_CHECKING:
    from model.config import ClusterConfig

def generate_key_pair() -> tuple[str, str]:
    """(private key in OpenSSH format, public key `ssh-ed25519 AAAA...`). Ed25519: what
    `ssh-keygen` makes by default (OpenSSH 9.5), accepted by GCE's `ssh-keys` metadata, OS
    Login and the guest agent; made in microseconds where an RSA key of 3072 bits took the
    provider 0.2-1.5 CPU-seconds. A stack made before keeps the RSA key its state holds."""
    # cryptography is imported where keys are made or read: a plan never needs it.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return private, public


def public_key_of(private_key_text: str) -> str:
    """The `ssh-...` public line of a private key (PEM or OpenSSH format)."""
    from cryptography.hazmat.primitives import serialization

    data = private_key_text.encode()
    loader = (
        serialization.load_ssh_private_key
        if b"OPENSSH PRIVATE KEY" in data
        else serialization.load_pem_private_key
    )
    key = loader(data, password=None)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )


class _KeyPairProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        private, public = generate_key_pair()
        return CreateResult(
            id_=public.split()[1][-16:],
            outs={"comment": props["comment"], "public_key": public, "private_key": private},
        )


class GeneratedKeyPair(Resource, module=MODULE, name="GeneratedKeyPair"):
    """An Ed25519 key pair created once; `private_key` is a secret output."""

    public_key: pulumi.Output[str]
    private_key: pulumi.Output[str]

    def __init__(self, name: str, comment: str, opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(
            legacy_aliases(opts), pulumi.ResourceOptions(additional_secret_outputs=["private_key"])
        )
        super().__init__(
            _KeyPairProvider(),
            name,
            {"comment": comment, "public_key": None, "private_key": None},
            opts,
        )


class ClusterSshKey(pulumi.ComponentResource):
    """`auth.ssh_private_key` when given (read now, kept secret), else a generated pair."""

    public_key: pulumi.Output[str]
    private_key: pulumi.Output[str]

    def __init__(
        self, name: str, config: ClusterConfig, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("ray-gcp:index:ClusterSshKey", name, None, opts)
        if config.auth.ssh_private_key:
            private = _read_key(config.auth.ssh_private_key, "auth.ssh_private_key")
            public = (
                _read_key(config.auth.ssh_public_key, "auth.ssh_public_key").strip()
                if config.auth.ssh_public_key
                else _public_key_of_file(private, config.auth.ssh_private_key)
            )
            if len(public.split()) < 2:
                raise ConfigError([("auth.ssh_public_key", f"{config.auth.ssh_public_key} is "
                                    "not an `ssh-<type> <base64>` public key: point it at the "
                                    ".pub file of the private key")])
            self.private_key = pulumi.Output.secret(private)
            self.public_key = pulumi.Output.from_input(public)
        else:
            pair = GeneratedKeyPair(
                f"{name}-pair",
                comment=config.auth.ssh_user,
                opts=pulumi.ResourceOptions(parent=self, depends_on=waits_for(opts)),
            )
            self.private_key = pulumi.Output.secret(pair.private_key)
            self.public_key = pair.public_key
        self.register_outputs({"public_key": self.public_key})


KEY_FILE_LIMIT = 64 * 1024  # far above any SSH key; stops a device file from being read


def _read_key(path: str, yaml_path: str) -> str:
    """A key file's text; a missing, special (FIFO, device), huge or non-text file is a
    ConfigError at `yaml_path`, checked before reading so nothing blocks."""
    fix = "point it at an existing key file or remove it to generate a key"
    file = expand_local_path(path)
    try:
        if not file.is_file() or file.stat().st_size > KEY_FILE_LIMIT:
            raise ConfigError([(yaml_path, f"{path} is not a key file: {fix}")])
        return file.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError([(yaml_path, f"cannot read {path} ({exc.strerror}): {fix}")]) \
            from None
    except UnicodeDecodeError:
        raise ConfigError([(yaml_path, f"{path} is not a text key file: {fix}")]) from None


def _public_key_of_file(private_key_text: str, path: str) -> str:
    from cryptography.exceptions import UnsupportedAlgorithm

    try:
        return public_key_of(private_key_text)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ConfigError([("auth.ssh_private_key", f"{path} is not an unencrypted private "
                            "key in PEM or OpenSSH format: point it at one (e.g. made by "
                            "`ssh-keygen -m PEM -N ''`) or remove it to generate a key")]) \
            from None


def ssh_keys_entry(user: str, public_key: str) -> str:
    """GCE's `ssh-keys` metadata line: `user:ssh-ed25519 AAAA... user`."""
    kind, body = public_key.split()[:2]
    return f"{user}:{kind} {body} {user}"
