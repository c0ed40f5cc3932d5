"""GCE's metadata limits, checked before anything is created.

GCE refuses a metadata value over 256 KB and an instance whose metadata adds up to over 512 KB.
What a node carries is its startup script (about 10 KB plus the YAML's commands), the node
config's own entries and a few short keys; the file_mounts and the head's autoscaler config,
which holds every node type's worker body, are in the cluster's bucket, so the number of node
types has no such limit. Very long commands, or large metadata of the YAML's own, can still
cross it, and the user should hear so from the plan, with the fix, not from the API halfway
through `up`.
"""

from __future__ import annotations

from bootstrap.file_mounts import FileMountArchive
from bootstrap.node_metadata import METADATA_TOTAL_LIMIT, METADATA_VALUE_LIMIT
from bootstrap.node_metadata import node_metadata as bootstrap_metadata
from model.config import ConfigError
from model.plan import ClusterPlan, NodeGroupPlan

# What the program adds to a node's metadata after this check: the `ssh-keys` line, the head's
# address, the reference to the autoscaler config and the key's secret version.
ALLOWANCE = 2048


def check_metadata_limits(plan: ClusterPlan, mounts: FileMountArchive | None = None) -> None:
    """Raise a ConfigError when some node's metadata would break GCE's limits."""
    problems = []
    for group in [plan.head, *plan.node_types.values()]:
        metadata = {**group.node_config.metadata,
                    **bootstrap_metadata(plan.config, group.role, group.node_type, mounts)}
        problems += _problems(group, metadata)
    if problems:
        raise ConfigError(sorted(set(problems)))


def _problems(group: NodeGroupPlan, metadata: dict[str, str]) -> list[tuple[str, str]]:
    where = f"available_node_types.{group.node_type}"
    problems = [
        (f"{where}.node_config.metadata" if key in group.node_config.metadata else where,
         f"{group.role} metadata {key!r} would be about {len(value) // 1024} KB, over GCE's "
         f"{METADATA_VALUE_LIMIT // 1024} KB for one value: move long commands into a script "
         "in file_mounts and run that")
        for key, value in metadata.items()
        if len(value) > METADATA_VALUE_LIMIT
    ]
    total = ALLOWANCE + sum(len(key) + len(value) for key, value in metadata.items())
    if not problems and total > METADATA_TOTAL_LIMIT:
        problems.append((where, (
            f"the {group.role}'s metadata would add up to about {total // 1024} KB, over GCE's "
            f"{METADATA_TOTAL_LIMIT // 1024} KB per instance: move long commands into a script "
            "in file_mounts, or node_config metadata into a file mount")))
    return problems
