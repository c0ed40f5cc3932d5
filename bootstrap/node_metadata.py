"""The metadata entries bootstrap needs on a node; the program merges them over the
node_config's own metadata and adds `ssh-keys`, `ray-head-address` and the head's
`ray-bootstrap-config` and `ray-bootstrap-ssh-key-secret` (the local cluster and tests give
the key itself as `ray-bootstrap-ssh-key`).

The head follows `ray-bootstrap-config` after boot (a detached watcher rewrites
`~/ray_bootstrap_config.yaml` when a `pulumi up` changes it), so changing that value needs no
instance replacement; the other entries are read once, at boot."""

from __future__ import annotations

from pathlib import Path

from bootstrap.autostop_metadata import autostop_entries
from bootstrap.file_mounts import plan_file_mounts
from bootstrap.startup_script import Role, render_startup_script
from infra.config import ClusterConfig

# Keys the program sets and the script reads.
HEAD_ADDRESS_KEY = "ray-head-address"
BOOTSTRAP_CONFIG_KEY = "ray-bootstrap-config"
BOOTSTRAP_SSH_KEY_KEY = "ray-bootstrap-ssh-key"
# On GCP the key stays in Secret Manager: this attribute names the secret version to read,
# `projects/<project>/secrets/<id>/versions/<version or latest>`. The head reads it with its
# service account's token, which needs roles/secretmanager.secretAccessor on the secret.
BOOTSTRAP_SSH_KEY_SECRET_KEY = "ray-bootstrap-ssh-key-secret"
STATUS_GUEST_ATTRIBUTE = "ray-bootstrap/status"  # `ready`, `running:<stage>`, `failed:<stage>:<rc>`
LOG_FILE = "/var/log/ray-bootstrap.log"
# GCE refuses one metadata value over 256 KB and an instance's metadata over 512 KB in all. The
# head's `ray-bootstrap-config` holds every node type's node_config, each with its own
# startup-script (about 9.5 KB: its library travels compressed).
METADATA_VALUE_LIMIT = 256 * 1024
METADATA_TOTAL_LIMIT = 512 * 1024


def node_metadata(
    config: ClusterConfig,
    role: Role,
    node_type: str,
    base_dir: Path | None = None,
) -> dict[str, str]:
    """`startup-script`, guest attributes on (the script reports its status there) and the
    small file_mounts, one key per file. `base_dir` resolves relative file_mounts sources."""
    plan = plan_file_mounts(config, base_dir)
    return {
        "startup-script": render_startup_script(config, role, node_type, plan),
        "enable-guest-attributes": "TRUE",
        **plan.metadata_entries(),
        **(autostop_entries(config) if role == "head" else {}),
    }
