"""The metadata entries bootstrap needs on a node; the program merges them over the
node_config's own metadata and adds `ssh-keys`, `ray-head-address` and the head's
`ray-bootstrap-config` and `ray-bootstrap-ssh-key-secret` (the local cluster and tests give
the key itself as `ray-bootstrap-ssh-key`), and on every node `ray-auth-token-secret`. On GCP
`ray-bootstrap-config` is a reference, `gs://BUCKET/OBJECT`, to the config in the cluster's
bucket; locally it is the YAML itself.

The head follows `ray-bootstrap-config` after boot (a detached watcher rewrites
`~/ray_bootstrap_config.yaml` when a `pulumi up` changes it), and every node follows
`ray-bootstrap-version` (its node watcher re-applies a changed startup script: changed stages
rerun, Ray restarts), so changing either needs no instance replacement."""

from __future__ import annotations

from bootstrap.autostop_metadata import autostop_entries
from bootstrap.file_mounts import FileMountArchive
from bootstrap.head_provider_metadata import head_provider_entries
from bootstrap.spend_metadata import spend_cap_entries
from bootstrap.startup_script import Role, render_startup_script, script_version
from model.config import ClusterConfig

# Keys the program sets and the script reads.
HEAD_ADDRESS_KEY = "ray-head-address"
BOOTSTRAP_CONFIG_KEY = "ray-bootstrap-config"
BOOTSTRAP_SSH_KEY_KEY = "ray-bootstrap-ssh-key"
# On GCP the key stays in Secret Manager: this attribute names the secret version to read,
# `projects/<project>/secrets/<id>/versions/<version or latest>`. The head reads it with its
# service account's token, which needs roles/secretmanager.secretAccessor on the secret.
BOOTSTRAP_SSH_KEY_SECRET_KEY = "ray-bootstrap-ssh-key-secret"
# Every node's (the autoscaler's own included): the secret version holding the cluster's Ray
# auth token (infra.ray_token; `.../versions/latest`), read the same way; the script writes
# it to RAY_AUTH_TOKEN_FILE under the home of the user Ray runs as (in the container with
# docker), mode 0600, and every `ray start` runs with RAY_AUTH_MODE=token and
# RAY_AUTH_TOKEN_PATH naming it.
RAY_AUTH_TOKEN_SECRET_KEY = "ray-auth-token-secret"
RAY_AUTH_TOKEN_FILE = ".ray/auth_token"  # Ray's own default place (~/.ray/auth_token)
STATUS_GUEST_ATTRIBUTE = "ray-bootstrap/status"  # `ready`, `running:<stage>`, `failed:<stage>:<rc>`
# With OS Login the guest ignores `ssh-keys`: the cluster's public key comes under this key
# instead, and the startup script authorizes it for auth.ssh_user (the head's Ray reaches
# workers with it). OS Login's own switch:
AUTHORIZED_KEY_KEY = "ray-authorized-key"
OS_LOGIN_KEY = "enable-oslogin"
# Every node's watcher follows this key: "<script version>[ <request>]", the request being
# `restart-only <stamp>` or `no-restart <stamp>` (invoke up --restart-only / --no-restart).
# It changes with the script, so it adds no replacement of its own.
VERSION_KEY = "ray-bootstrap-version"
VERSION_GUEST_ATTRIBUTE = "ray-bootstrap/version"  # the script version a node last applied
# `invoke up --restart-only / --no-restart` sets this for the program: "<mode> <stamp>", put in
# the head's ray-bootstrap-version and in each worker group's (infra.metadata.with_worker_request),
# never in the autoscaler's copy of a worker node_config; workers restart Ray after the head.
REAPPLY_ENV = "RAY_GCP_REAPPLY"
# A node Pulumi keeps (a worker group's, a TPU slice) carries this key with value
# NODE_KIND_PINNED, as its `ray-node-type` label says (GCE serves no labels to the node): its
# script then reports no RAY_CLOUD_INSTANCE_ID, so Ray's autoscaler v2 never adopts it. The
# autoscaler's copy of a node_config never carries it: the workers it launches report theirs.
NODE_KIND_KEY = "ray-node-kind"
NODE_KIND_PINNED = "unmanaged"
# On GCE the node also mirrors its guest attributes here, for `invoke status` over SSH.
STATE_DIR = "/run/ray-bootstrap"
LOG_FILE = "/var/log/ray-bootstrap.log"
# GCE refuses one metadata value over 256 KB and an instance's metadata over 512 KB in all
# (the head's autoscaler config, a worker body per node type, is in the bucket for that reason).
METADATA_VALUE_LIMIT = 256 * 1024
METADATA_TOTAL_LIMIT = 512 * 1024


def node_metadata(
    config: ClusterConfig,
    role: Role,
    node_type: str,
    mounts: FileMountArchive | None = None,
    request: str = "",
) -> dict[str, str]:
    """`startup-script`, its version (with a re-apply `request`, if any) and guest attributes
    on (the script reports its status there). `mounts` is the packed file_mounts archive the
    script fetches from the cluster's bucket (bootstrap.file_mounts.pack_file_mounts)."""
    script = render_startup_script(config, role, node_type, mounts)
    return {
        "startup-script": script,
        VERSION_KEY: f"{script_version(script)} {request}".strip(),
        "enable-guest-attributes": "TRUE",
        **(autostop_entries(config) if role == "head" else {}),
        **(spend_cap_entries(config) if role == "head" else {}),
        **(head_provider_entries() if role == "head" else {}),
    }


def script_versions(
    config: ClusterConfig, mounts: FileMountArchive | None = None
) -> dict[str, str]:
    """What each node should report once converged: `head` and every worker type -> the
    SCRIPT_VERSION of its startup script (exported for `invoke status`)."""
    versions = {"head": script_version(
        render_startup_script(config, "head", config.head_node_type, mounts))}
    for node_type in config.worker_types:
        versions[node_type] = script_version(
            render_startup_script(config, "worker", node_type, mounts))
    return versions
