"""Instance metadata: the YAML's own entries, then bootstrap's, then keys and addresses.

Merged, not overwritten: a user's `install-nvidia-driver` survives next to the startup script.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from bootstrap.file_mounts import FileMountArchive
from bootstrap.node_metadata import (
    AUTHORIZED_KEY_KEY,
    BOOTSTRAP_CONFIG_KEY,
    BOOTSTRAP_SSH_KEY_SECRET_KEY,
    HEAD_ADDRESS_KEY,
    NODE_KIND_KEY,
    NODE_KIND_PINNED,
    OS_LOGIN_KEY,
    RAY_AUTH_TOKEN_SECRET_KEY,
    REAPPLY_ENV,
    VERSION_KEY,
)
from bootstrap.node_metadata import node_metadata as bootstrap_metadata
from infra.ssh_keys import ssh_keys_entry
from model.config import ClusterConfig
from model.plan import NodeGroupPlan

__all__ = [
    "BOOTSTRAP_CONFIG_KEY",
    "BOOTSTRAP_SSH_KEY_SECRET_KEY",
    "HEAD_ADDRESS_KEY",
    "PINNED_METADATA",
    "RAY_AUTH_TOKEN_SECRET_KEY",
    "REAPPLY_ENV",
    "pinned_body",
    "merge_metadata",
    "with_worker_request",
]


def merge_metadata(
    config: ClusterConfig,
    group: NodeGroupPlan,
    public_key: pulumi.Input[str],
    extra: Mapping[str, pulumi.Input[str]],
    mounts: pulumi.Output[FileMountArchive] | None = None,
    request: str = "",
) -> dict[str, pulumi.Input[str]]:
    """The node's metadata: node_config entries < bootstrap's < ssh-keys < `extra`. With
    OS Login, `enable-oslogin` and the cluster's public key for the startup script instead of
    `ssh-keys` (which the guest then ignores).

    Keys are known now and values may be outputs, so a secret value stays secret alone and the
    rest shows in previews. The startup script names the file_mounts archive in the cluster's
    bucket (`mounts`, named with the stack's secret key: bootstrap_entries); its content is
    never in metadata. A user's own `ssh-keys`
    line is kept next to the cluster's key, not replaced by it. `request` asks the node watcher
    for a re-apply mode (the head's; a worker group's body gets it from with_worker_request)."""
    own = dict(group.node_config.metadata)
    user_lines = [own.pop("ssh-keys")] if own.get("ssh-keys") else []
    cluster_line = pulumi.Output.from_input(public_key).apply(
        lambda key: ssh_keys_entry(config.auth.ssh_user, key)
    )
    bootstrap = bootstrap_entries(config, group, mounts, request)
    if config.provider.os_login:
        keys = {
            OS_LOGIN_KEY: "TRUE",
            AUTHORIZED_KEY_KEY: pulumi.Output.from_input(public_key).apply(
                lambda key: " ".join(key.split()[:2])
            ),
        }
    else:
        keys = {"ssh-keys": cluster_line.apply(lambda line: "\n".join([*user_lines, line]))}
    return {**own, **bootstrap, **keys, **extra}


def bootstrap_entries(
    config: ClusterConfig,
    group: NodeGroupPlan,
    mounts: pulumi.Output[FileMountArchive] | None,
    request: str,
) -> dict[str, pulumi.Input[str]]:
    """bootstrap's entries for the node. With file_mounts the script and its version wait for
    the archive's name, an HMAC under the stack's secret key: they carry no secret (the key only
    reaches them through the HMAC), so they are unsecreted and show in previews."""
    if mounts is None:
        return dict(bootstrap_metadata(config, group.role, group.node_type, None, request))
    rendered = pulumi.Output.unsecret(mounts.apply(
        lambda archive: bootstrap_metadata(config, group.role, group.node_type, archive, request)
    ))
    # The keys do not depend on the archive: the same as without one.
    keys = bootstrap_metadata(config, group.role, group.node_type, None, request)
    return {key: rendered.apply(lambda entries, key=key: entries[key]) for key in keys}


# The metadata every node Pulumi keeps carries besides its type's (bootstrap.node_metadata).
PINNED_METADATA = {NODE_KIND_KEY: NODE_KIND_PINNED}


def pinned_body(body: dict[str, Any]) -> dict[str, Any]:
    """A worker group's body: the type's, marked as a node Pulumi keeps (PINNED_METADATA), so
    its Ray does not report itself to autoscaler v2 as one of the autoscaler's instances."""
    items = [item for item in body["metadata"]["items"] if item["key"] not in PINNED_METADATA]
    items += [{"key": key, "value": value} for key, value in PINNED_METADATA.items()]
    return {**body, "metadata": {**body["metadata"], "items": items}}


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
