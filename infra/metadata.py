"""Instance metadata: the YAML's own entries, then bootstrap's, then keys and addresses.

Merged, not overwritten: a user's `install-nvidia-driver` survives next to the startup script.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from bootstrap import node_metadata as bootstrap_metadata
from bootstrap.file_mounts import is_file_mount_key
from bootstrap.node_metadata import (
    BOOTSTRAP_CONFIG_KEY,
    BOOTSTRAP_SSH_KEY_SECRET_KEY,
    HEAD_ADDRESS_KEY,
    REAPPLY_ENV,
    VERSION_KEY,
)
from infra.config import ClusterConfig
from infra.plan import NodeGroupPlan
from infra.ssh_keys import ssh_keys_entry

__all__ = [
    "BOOTSTRAP_CONFIG_KEY",
    "BOOTSTRAP_SSH_KEY_SECRET_KEY",
    "HEAD_ADDRESS_KEY",
    "REAPPLY_ENV",
    "merge_metadata",
    "with_worker_request",
]


def merge_metadata(
    config: ClusterConfig,
    group: NodeGroupPlan,
    public_key: pulumi.Input[str],
    extra: Mapping[str, pulumi.Input[str]],
    request: str = "",
    digest_key: pulumi.Output[str] | None = None,
) -> dict[str, pulumi.Input[str]]:
    """The node's metadata: node_config entries < bootstrap's < ssh-keys < `extra`.

    Keys are known now and values may be outputs, so a secret value (file_mounts content, the
    head's key) stays secret alone and the rest shows in previews. A user's own `ssh-keys`
    line is kept next to the cluster's key, not replaced by it. `request` asks the node watcher
    for a re-apply mode (the head's; a worker group's body gets it from with_worker_request).
    `digest_key` is the stack's secret keying the file_mounts content digest (keyed_entries)."""
    own = dict(group.node_config.metadata)
    user_lines = [own.pop("ssh-keys")] if own.get("ssh-keys") else []
    cluster_line = pulumi.Output.from_input(public_key).apply(
        lambda key: ssh_keys_entry(config.auth.ssh_user, key)
    )
    bootstrap = {
        key: pulumi.Output.secret(value) if is_file_mount_key(key) else value
        for key, value in bootstrap_metadata(
            config, group.role, group.node_type, request=request
        ).items()
    }
    if digest_key is not None and any(is_file_mount_key(key) for key in bootstrap):
        bootstrap.update(keyed_entries(config, group, request, digest_key))
    return {
        **own,
        **bootstrap,
        "ssh-keys": cluster_line.apply(lambda line: "\n".join([*user_lines, line])),
        **extra,
    }


def keyed_entries(
    config: ClusterConfig, group: NodeGroupPlan, request: str, digest_key: pulumi.Output[str]
) -> dict[str, pulumi.Output[str]]:
    """The startup script and its version rendered with the stack's digest key. They are not
    secret (the key only reaches them through an HMAC), so they show in previews; a key the
    run does not know (a plan made offline) leaves the content out (bootstrap/file_mounts.py)."""
    keyed = pulumi.Output.secret(digest_key).apply(
        lambda key: bootstrap_metadata(
            config, group.role, group.node_type, request=request, digest_key=key or None
        )
    )
    return {
        key: pulumi.Output.unsecret(keyed.apply(lambda entries, key=key: entries[key]))
        for key in ("startup-script", VERSION_KEY)
    }


def with_worker_request(body: dict[str, Any], request: str) -> dict[str, Any]:
    """A worker group's body with `invoke up`'s re-apply request on its
    `ray-bootstrap-version`, as the head's: on `--no-restart` its workers rerun a changed setup
    and leave Ray running, on `--restart-only` they skip setup and restart Ray once the head has
    (a worker's restart waits for the head). Only the group's body gets it, never the
    autoscaler's copy of the node_config (a new launch hash would make Ray replace the
    autoscaler's own workers)."""
    if not request:
        return body
    items = [
        {**item, "value": f"{item['value']} {request}"} if item["key"] == VERSION_KEY else item
        for item in body["metadata"]["items"]
    ]
    return {**body, "metadata": {**body["metadata"], "items": items}}
