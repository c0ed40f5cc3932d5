"""The metadata entries bootstrap needs on a node; the program merges them over the
node_config's own metadata and adds `ssh-keys`, `ray-head-address` and the head's
`ray-bootstrap-config` and `ray-bootstrap-ssh-key-secret` (the local cluster and tests give
the key itself as `ray-bootstrap-ssh-key`).

The head follows `ray-bootstrap-config` after boot (a detached watcher rewrites
`~/ray_bootstrap_config.yaml` when a `pulumi up` changes it), and every node follows
`ray-bootstrap-version` (its node watcher re-applies a changed startup script: changed stages
rerun, Ray restarts), so changing either needs no instance replacement."""

from __future__ import annotations

from pathlib import Path

from bootstrap.autostop_metadata import autostop_entries
from bootstrap.file_mounts import plan_file_mounts
from bootstrap.startup_script import Role, render_startup_script, script_version
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
# Every node's watcher follows this key: "<script version>[ <request>]", the request being
# `restart-only <stamp>` or `no-restart <stamp>` (invoke up --restart-only / --no-restart).
# It changes with the script, so it adds no replacement of its own.
VERSION_KEY = "ray-bootstrap-version"
VERSION_GUEST_ATTRIBUTE = "ray-bootstrap/version"  # the script version a node last applied
# `invoke up --restart-only / --no-restart` sets this for the program: "<mode> <stamp>", put in
# the head's ray-bootstrap-version and in each worker group's (infra.metadata.with_worker_request),
# never in the autoscaler's copy of a worker node_config; workers restart Ray after the head.
REAPPLY_ENV = "RAY_GCP_REAPPLY"
# On GCE the node also mirrors its guest attributes here, for `invoke status` over SSH.
STATE_DIR = "/run/ray-bootstrap"
LOG_FILE = "/var/log/ray-bootstrap.log"
# GCE refuses one metadata value over 256 KB and an instance's metadata over 512 KB in all. The
# head's `ray-bootstrap-config` holds every node type's node_config, each with its own
# startup-script (a worker's is about 10.5 KB: its library travels compressed, without the
# head's parts).
METADATA_VALUE_LIMIT = 256 * 1024
METADATA_TOTAL_LIMIT = 512 * 1024


def node_metadata(
    config: ClusterConfig,
    role: Role,
    node_type: str,
    base_dir: Path | None = None,
    request: str = "",
    digest_key: str | None = None,
) -> dict[str, str]:
    """`startup-script`, its version (with a re-apply `request`, if any), guest attributes on
    (the script reports its status there) and the small file_mounts, one key per file.
    `base_dir` resolves relative file_mounts sources; `digest_key` is the stack's secret that
    keys the mounts' content digest (bootstrap/file_mounts.py)."""
    plan = plan_file_mounts(config, base_dir, digest_key)
    script = render_startup_script(config, role, node_type, plan)
    return {
        "startup-script": script,
        VERSION_KEY: f"{script_version(script)} {request}".strip(),
        "enable-guest-attributes": "TRUE",
        **plan.metadata_entries(),
        **(autostop_entries(config) if role == "head" else {}),
    }


def script_versions(
    config: ClusterConfig, base_dir: Path | None = None, digest_key: str | None = None
) -> dict[str, str]:
    """What each node should report once converged: `head` and every worker type -> the
    SCRIPT_VERSION of its startup script (exported for `invoke status`)."""
    plan = plan_file_mounts(config, base_dir, digest_key)
    versions = {"head": script_version(
        render_startup_script(config, "head", config.head_node_type, plan))}
    for node_type in config.worker_types:
        versions[node_type] = script_version(
            render_startup_script(config, "worker", node_type, plan))
    return versions
