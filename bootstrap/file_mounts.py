"""Which `file_mounts` travel in instance metadata and which the invoke tasks sync over SSH.

GCE caps one metadata value at 256 KB and all of an instance's metadata at 512 KB, and the
startup script, SSH keys and the head's autoscaler config share that room. So a mount goes
in metadata only when it is a single regular file whose base64 fits the per-value limit and
the running total stays inside a budget of half the instance's metadata; directories and
larger files are left to the SSH sync.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path

from infra.config import ClusterConfig

METADATA_VALUE_LIMIT = 256 * 1024
METADATA_FILE_MOUNT_BUDGET = 256 * 1024
KEY_PREFIX = "ray-file-mount-"


@dataclass(frozen=True)
class MetadataMount:
    """A small file: its base64 content is the metadata value of `key`."""

    key: str
    target: str
    content_base64: str


@dataclass(frozen=True)
class FileMountPlan:
    in_metadata: list[MetadataMount] = field(default_factory=list)
    over_ssh: dict[str, str] = field(default_factory=dict)  # remote target -> local source

    def metadata_entries(self) -> dict[str, str]:
        return {mount.key: mount.content_base64 for mount in self.in_metadata}

    @property
    def targets(self) -> list[str]:
        """Every remote path, however it travels (docker bind-mounts all of them)."""
        return sorted({m.target for m in self.in_metadata} | set(self.over_ssh))


def plan_file_mounts(config: ClusterConfig, base_dir: Path | None = None) -> FileMountPlan:
    """Split the config's file_mounts; relative local paths are read from `base_dir` (the
    directory the cluster YAML is used from, as `ray up` reads them from its cwd)."""
    base = base_dir or Path.cwd()
    plan = FileMountPlan()
    used = 0
    for target, source in sorted(config.file_mounts.items()):
        path = _absolute(base / Path(source).expanduser())
        encoded = _small_file_base64(path)
        if encoded is not None and used + len(encoded) <= METADATA_FILE_MOUNT_BUDGET:
            key = f"{KEY_PREFIX}{len(plan.in_metadata)}"
            plan.in_metadata.append(MetadataMount(key, target, encoded))
            used += len(encoded)
        else:
            plan.over_ssh[target] = str(path)
    return plan


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
