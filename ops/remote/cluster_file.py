"""The stack's cluster YAML (the `cluster_config_file` output): rsync excludes, filters, mounts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from infra.stack_config import PROJECT_ROOT
from ops.errors import OpsError
from ops.stack import StackOutputs

if TYPE_CHECKING:
    from infra.config import ClusterConfig


def load_for_stack(outputs: StackOutputs) -> ClusterConfig | None:
    """None when the stack names no file (then there is nothing to exclude or mount)."""
    if not outputs.cluster_config_file:
        return None
    from infra.config import ConfigError, load_cluster_config
    from infra.stack_config import resolve_cluster_path

    path = resolve_cluster_path(outputs.cluster_config_file)
    if not path.is_file():
        raise OpsError(f"{outputs.cluster_config_file}, the cluster YAML stack {outputs.stack!r} "
                       "was deployed from (its output cluster_config_file), is not here: run "
                       "from the checkout that deployed it, or restore the file")
    try:
        return load_cluster_config(path)
    except ConfigError as exc:
        raise OpsError(f"stack {outputs.stack!r} (output cluster_config_file): {exc}") from None


def rsync_excludes(outputs: StackOutputs) -> list[str]:
    config = load_for_stack(outputs)
    return list(config.rsync_exclude) if config else []


def rsync_filters(outputs: StackOutputs) -> list[str]:
    """Names of per-directory filter files (e.g. .gitignore) whose patterns are excluded too."""
    config = load_for_stack(outputs)
    return list(config.rsync_filter) if config else []


def file_mounts(outputs: StackOutputs) -> dict[str, str]:
    """remote path -> local path, local paths resolved from the project root like the YAML's."""
    config = load_for_stack(outputs)
    if not config:
        return {}
    return {
        remote: str(PROJECT_ROOT / Path(local).expanduser())  # absolute paths stay as they are
        for remote, local in config.file_mounts.items()
    }
