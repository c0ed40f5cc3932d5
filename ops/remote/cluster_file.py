"""The stack's cluster YAML (the `cluster_config_file` output): rsync excludes, filters, mounts.

The excludes and filters are kept in the stack's state folder (`sync_rules.json`, 0600),
under a key made of the YAML's bytes and the config model's source files: a later rsync-up
reads them there without importing the model (a quarter of a second, more than the rest of
a small sync's work here), and a change to the YAML or the model reads the YAML again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from model.stack_config import PROJECT_ROOT
from ops.errors import OpsError
from ops.paths import open_no_follow, state_dir
from ops.stack import StackOutputs

RULES_FILE = "sync_rules.json"

if TYPE_CHECKING:
    from model.config import ClusterConfig


def load_for_stack(outputs: StackOutputs) -> ClusterConfig | None:
    """None when the stack names no file (then there is nothing to exclude or mount)."""
    if not outputs.cluster_config_file:
        return None
    from model.config import ConfigError, load_cluster_config
    from model.stack_config import resolve_cluster_path

    path = resolve_cluster_path(outputs.cluster_config_file)
    if not path.is_file():
        raise OpsError(f"{outputs.cluster_config_file}, the cluster YAML stack {outputs.stack!r} "
                       "was deployed from (its output cluster_config_file), is not here: run "
                       "from the checkout that deployed it, or restore the file")
    try:
        return load_cluster_config(path)
    except ConfigError as exc:
        raise OpsError(f"stack {outputs.stack!r} (output cluster_config_file): {exc}") from None


class SyncRules(NamedTuple):
    excludes: list[str]
    """rsync_exclude patterns."""
    filters: list[str]
    """rsync_filter: names of per-folder filter files (e.g. .gitignore) that exclude too."""


def sync_rules(outputs: StackOutputs) -> SyncRules:
    """The cluster YAML's rsync_exclude and rsync_filter (none without a YAML), from the
    state folder when the YAML and the model are as they were when it was read."""
    if not outputs.cluster_config_file:
        return SyncRules([], [])
    from model.stack_config import resolve_cluster_path

    path = resolve_cluster_path(outputs.cluster_config_file)
    key = _rules_key(path) if path.is_file() else None
    kept = state_dir(outputs.stack) / RULES_FILE
    if key is not None:
        try:
            with open_no_follow(kept, os.O_RDONLY) as handle:
                cached = json.loads(handle.read())
            if cached["key"] == key:
                return SyncRules(list(cached["excludes"]), list(cached["filters"]))
        except (OpsError, ValueError, KeyError, TypeError):
            pass  # none kept yet, or unreadable: read the YAML
    config = load_for_stack(outputs)
    rules = SyncRules(list(config.rsync_exclude), list(config.rsync_filter))
    if key is not None:
        with open_no_follow(kept, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) as handle:
            handle.write(json.dumps({"key": key, **rules._asdict()}).encode())
    return rules


def _rules_key(path: Path) -> str:
    """The YAML's bytes and the config model's sources (name, size, mtime): what the rules
    are read from, and how."""
    digest = hashlib.sha256(path.read_bytes())
    for source in sorted((PROJECT_ROOT / "model" / "config").glob("*.py")):
        st = source.stat()
        digest.update(f"\0{source.name}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def file_mounts(outputs: StackOutputs) -> dict[str, str]:
    """remote path -> local path, relative local paths resolved from the folder the task runs
    in, as `ray up` resolves them (and the program, which runs in the task's process)."""
    config = load_for_stack(outputs)
    if not config:
        return {}
    return {
        remote: str(Path(local).expanduser().absolute())  # absolute paths stay as they are
        for remote, local in config.file_mounts.items()
    }
