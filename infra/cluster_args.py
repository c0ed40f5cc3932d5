"""What a `RayCluster` is made from (`RayClusterArgs`), and the checks made before any
resource: the config read and validated, its node plan, the packed file_mounts.

Another Pulumi program writes `RayCluster("ml", RayClusterArgs(config="cluster.yaml"))` (or
the YAML as a dict); this program passes the ClusterConfig it read from its stack settings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from bootstrap.file_mounts import PackedMounts, pack_file_mounts, synced_files_outside_mounts
from infra.metadata_limits import check_metadata_limits
from model.adoption import read_adoption
from model.config import ClusterConfig, ConfigError, load_cluster_config, parse_cluster_config
from model.plan import ClusterPlan, check_boot_disks, plan_cluster

INLINE_SOURCE = "RayClusterArgs.config"


@dataclass(frozen=True)
class RayClusterArgs:
    """The inputs of a RayCluster.

    `config`: a Ray cluster YAML's path (relative paths from the working directory, as `ray
    up` reads them), the YAML as a dict, or a parsed ClusterConfig. `worker_counts`: node type
    -> the number of workers Pulumi keeps (default: each type's `min_workers`). `stack`: the
    value of the `ray-gcp-stack` label on every node (default: from the organization, project
    and stack names, model.labels.stack_identity); the sweeper deletes nodes by it.
    """

    config: str | os.PathLike[str] | Mapping[str, Any] | ClusterConfig
    worker_counts: Mapping[str, int] | None = None
    stack: str | None = None
    adopt: Mapping[str, Any] | None = None
    """A stack file's `ray-gcp:adopt`: what a cluster `ray up` made gives the stack
    (model/adoption.py, written by `invoke adopt`)."""


class ClusterConfigError(pulumi.RunError):
    """A config the cluster cannot be made from: one message naming the file (or the
    `RayClusterArgs.config` dict) and the fix; Pulumi prints it without a traceback."""

    def __init__(self, error: ConfigError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class PreparedCluster:
    config: ClusterConfig
    plan: ClusterPlan
    mounts: PackedMounts | None


def read_config(config: RayClusterArgs) -> ClusterConfig:
    value = config.config
    if isinstance(value, ClusterConfig):
        return value
    if isinstance(value, str | os.PathLike):
        return load_cluster_config(Path(value))
    return parse_cluster_config(dict(value), INLINE_SOURCE)


def prepare_cluster(args: RayClusterArgs) -> PreparedCluster:
    """The config, its plan and its file_mounts; every problem is a ClusterConfigError. The
    config's warnings are logged as Pulumi warnings."""
    try:
        config = read_config(args)
        for warning in [*config.warnings, *config.review_warnings]:
            pulumi.log.warn(warning)
        plan = plan_cluster(config, args.worker_counts, read_adoption(args.adopt))
        check_boot_disks(plan)
        # Packed once: every node's script names the archive by its content's keyed hash.
        mounts = pack_file_mounts(config)
        check_metadata_limits(plan, mounts.stand_in() if mounts is not None else None)
    except ConfigError as error:
        raise ClusterConfigError(error) from None
    warn_unsynced_files(config)
    return PreparedCluster(config, plan, mounts)


def warn_unsynced_files(config: ClusterConfig) -> None:
    """`cluster_synced_files` outside every mount target reach no other node: say so."""
    for path in synced_files_outside_mounts(config):
        pulumi.log.warn(
            f"cluster_synced_files {path}: not under any file_mounts target, so no node gets it "
            "(every node fetches file_mounts from the cluster's bucket, nothing is copied from "
            "the head): add its local source to file_mounts"
        )
