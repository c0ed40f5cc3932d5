"""GCE's metadata limits, checked before anything is created.

GCE refuses a metadata value over 256 KB and an instance whose metadata adds up to over 512 KB.
The head carries its autoscaler config, which holds every node type's worker body, startup
script included (Ray's autoscaler launches its workers from them, and they boot themselves):
about twenty node types, or very long commands, cross the limit, and the user should hear so
from the plan, with the fix, not from the API halfway through `up`.
"""

from __future__ import annotations

from bootstrap import autoscaler_config
from bootstrap import node_metadata as bootstrap_metadata
from bootstrap.node_metadata import (
    BOOTSTRAP_CONFIG_KEY,
    METADATA_TOTAL_LIMIT,
    METADATA_VALUE_LIMIT,
)
from infra.config import ConfigError
from infra.plan import ClusterPlan
from infra.yaml_text import dump_yaml

# What the program adds to each worker body after this check: the subnet's network interface,
# the service account, the `ssh-keys` line and the head's address.
PER_TYPE_ALLOWANCE = 2048


def check_metadata_limits(plan: ClusterPlan) -> None:
    """Raise a ConfigError when the head's metadata would break GCE's limits."""
    config = plan.config
    bodies = {
        node_type: {
            **group.node_config.body(),
            "metadata": {"items": [
                {"key": key, "value": value}
                for key, value in {
                    **group.node_config.metadata,
                    **bootstrap_metadata(config, "worker", node_type),
                }.items()
            ]},
        }
        for node_type, group in plan.node_types.items()
    }
    counts = {group.node_type: group.count for group in plan.workers}
    config_size = len(dump_yaml(autoscaler_config(config, bodies, counts)))
    config_size += PER_TYPE_ALLOWANCE * len(bodies)
    head_metadata = {**plan.head.node_config.metadata,
                     **bootstrap_metadata(config, "head", plan.head.node_type)}
    total = config_size + sum(len(k) + len(v) for k, v in head_metadata.items())
    problems = []
    if config_size > METADATA_VALUE_LIMIT:
        problems.append(("available_node_types", (
            f"the head's autoscaler config ({BOOTSTRAP_CONFIG_KEY}) would be about "
            f"{config_size // 1024} KB, over GCE's {METADATA_VALUE_LIMIT // 1024} KB limit for "
            "one metadata value: declare fewer node types, or move long setup commands into "
            "a script in file_mounts")))
    elif total > METADATA_TOTAL_LIMIT:
        problems.append(("available_node_types", (
            f"the head's metadata would add up to about {total // 1024} KB, over GCE's "
            f"{METADATA_TOTAL_LIMIT // 1024} KB per instance: declare fewer node types, or "
            "sync large file_mounts over SSH instead of metadata")))
    if problems:
        raise ConfigError(problems)
