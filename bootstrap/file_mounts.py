"""Which `file_mounts` travel in instance metadata and which the invoke tasks sync over SSH.

GCE caps one metadata value at 256 KB and all of an instance's metadata at 512 KB, and the
startup script, SSH keys and the head's autoscaler config share that room. So a mount goes
in metadata only when it is a single regular file whose base64 fits the per-value limit and
the running total stays inside a budget of half the instance's metadata; directories and
larger files are left to the SSH sync.

What travels in metadata is readable by anyone who may view the instance (and by every process
on it), so the program makes each value a Pulumi secret: plans show `[secret]` and the state
keeps it encrypted. A file that looks like a key or a credential (a PEM/OpenSSH private key, a
service-account or OAuth JSON, `id_rsa`, `*.pem`, ...) is not inlined at all unless
`provider.inline_secret_file_mounts: true` asks for it: it goes over SSH with the large files.

On the node a mount keeps its local file's mode, never wider than 0644 (a key-like file 0600),
and the script's stage hash and version cover its content only through an HMAC keyed with the
stack's own random secret (`digest_key`, a Pulumi secret): the public script and
`ray-bootstrap-version` reveal nothing about a short secret file to anyone without the stack's
state. A run that does not hold that key (the offline plan, the local cluster) leaves the
content out of the hash (`digest_key=None`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import stat
from dataclasses import dataclass, field
from pathlib import Path

from infra.config import ClusterConfig

METADATA_VALUE_LIMIT = 256 * 1024
METADATA_FILE_MOUNT_BUDGET = 256 * 1024
KEY_PREFIX = "ray-file-mount-"

# What a key or credential file looks like, by name and by content.
_SECRET_NAMES = frozenset({"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk",
                           "id_ed25519_sk", ".netrc", ".pgpass", "credentials",
                           "application_default_credentials.json"})
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk")
_SECRET_MARKERS = (b"PRIVATE KEY", b"PuTTY-User-Key-File", b'"private_key"',
                   b'"refresh_token"', b'"client_secret"', b"aws_secret_access_key")


@dataclass(frozen=True)
class MetadataMount:
    """A small file: its base64 content is the metadata value of `key`."""

    key: str
    target: str
    content_base64: str
    mode: int = 0o644
    """What the node gives the file: the local mode within 0644 (a key-like file's within 0600)."""


@dataclass(frozen=True)
class FileMountPlan:
    in_metadata: list[MetadataMount] = field(default_factory=list)
    over_ssh: dict[str, str] = field(default_factory=dict)  # remote target -> local source

    held_back: list[str] = field(default_factory=list)
    """Targets of key-like files sent over SSH instead of metadata (not asked to inline)."""

    digest_key: str | None = None
    """The stack's secret that keys `content_digest`; None: the content is left out."""

    def content_digest(self) -> str:
        """HMAC-SHA256 of the metadata mounts' content under `digest_key` ("" without one):
        what the file-mounts stage hash (and so the script version) knows of the content."""
        if self.digest_key is None or not self.in_metadata:
            return ""
        content = json.dumps([[m.target, m.content_base64] for m in self.in_metadata])
        return hmac.new(self.digest_key.encode(), content.encode(), hashlib.sha256).hexdigest()

    def metadata_entries(self) -> dict[str, str]:
        return {mount.key: mount.content_base64 for mount in self.in_metadata}

    @property
    def targets(self) -> list[str]:
        """Every remote path, however it travels (docker bind-mounts all of them)."""
        return sorted({m.target for m in self.in_metadata} | set(self.over_ssh))


def plan_file_mounts(
    config: ClusterConfig, base_dir: Path | None = None, digest_key: str | None = None
) -> FileMountPlan:
    """Split the config's file_mounts; relative local paths are read from `base_dir` (the
    directory the cluster YAML is used from, as `ray up` reads them from its cwd)."""
    base = base_dir or Path.cwd()
    plan = FileMountPlan(digest_key=digest_key)
    used = 0
    inline_secrets = config.provider.inline_secret_file_mounts
    for target, source in sorted(config.file_mounts.items()):
        path = _absolute(base / Path(source).expanduser())
        encoded = _small_file_base64(path)
        secret = encoded is not None and looks_like_a_secret(path)
        if secret and not inline_secrets:
            plan.held_back.append(target)
            plan.over_ssh[target] = str(path)
        elif encoded is not None and used + len(encoded) <= METADATA_FILE_MOUNT_BUDGET:
            key = f"{KEY_PREFIX}{len(plan.in_metadata)}"
            mode = node_mode(path.stat().st_mode, secret)
            plan.in_metadata.append(MetadataMount(key, target, encoded, mode))
            used += len(encoded)
        else:
            plan.over_ssh[target] = str(path)
    return plan


def node_mode(local_mode: int, secret: bool) -> int:
    """A metadata mount's mode on the node: the local file's permission bits, never wider
    than 0644 (no execute, no write for others, no setuid/setgid/sticky), and never wider than
    0600 for a key-like file."""
    return stat.S_IMODE(local_mode) & (0o600 if secret else 0o644)


def is_file_mount_key(key: str) -> bool:
    """Whether a metadata key carries file_mounts content (a secret wherever it goes)."""
    return key.startswith(KEY_PREFIX)


def looks_like_a_secret(path: Path) -> bool:
    """A private key or a credential, by its name or its content."""
    name = path.name.lower()
    if name in _SECRET_NAMES or name.endswith(_SECRET_SUFFIXES):
        return True
    content = path.read_bytes()
    return any(marker in content for marker in _SECRET_MARKERS)


def _absolute(path: Path) -> Path:
    """Resolved like `ray up` would; a symlink loop stays as written (the sync reports it)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _small_file_base64(path: Path) -> str | None:
    """The file's base64 when it is a small regular file we can read; else the SSH sync
    takes it (and says what is wrong with it)."""
    try:
        if not path.is_file() or path.stat().st_size > METADATA_VALUE_LIMIT:
            return None
        encoded = base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return None
    return encoded if len(encoded) <= METADATA_VALUE_LIMIT else None
