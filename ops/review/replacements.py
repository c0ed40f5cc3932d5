"""Whether a planned change replaces a resource rather than updating it in place: the
dynamic providers' own rules (infra/workers) and the pulumi-gcp inputs that cannot change on
a live resource.
"""

from __future__ import annotations

from typing import Any

from infra.dynamic_types import CLUSTER_SWEEPER_TYPE, QUEUED_TPU_SLICE_TYPE, WORKER_GROUP_TYPE
from infra.workers.naming import replaced_keys
from infra.workers.provider import IN_PLACE_KEYS
from infra.workers.queued_slice import replaced_keys as queued_slice_replaced_keys
from infra.workers.sweeper import SWEEPER_IDENTITY_KEYS
from ops.pulumi_types import BUCKET_OBJECT_TYPE, INSTANCE_TYPE, TPU_VM_TYPE
from ops.review.plan_values import MISSING

# What a change to these inputs does: the dynamic providers' own rules.
WORKER_GROUP_IN_PLACE = frozenset(IN_PLACE_KEYS)
SWEEPER_REPLACE_KEYS = frozenset(SWEEPER_IDENTITY_KEYS)
# pulumi-gcp inputs that cannot change on a live resource.
REPLACE_KEYS: dict[str, frozenset[str]] = {
    INSTANCE_TYPE: frozenset({"name", "project", "zone", "bootDisk", "scratchDisks"}),
    TPU_VM_TYPE: frozenset({"name", "project", "zone", "acceleratorType", "acceleratorConfig",
                            "runtimeVersion", "schedulingConfig", "dataDisks"}),
    "gcp:serviceaccount/account:Account": frozenset({"accountId", "project"}),
    "gcp:projects/iAMMember:IAMMember": frozenset({"member", "project", "role", "condition"}),
    # Not `network`: the Terraform resource pulumi-gcp bridges does not mark it ForceNew, so
    # `pulumi preview` shows an update (tests/engine/test_engine_diff.py holds us to the engine).
    "gcp:compute/firewall:Firewall": frozenset({"name", "project", "direction"}),
    # google_storage_bucket_object: `bucket`, `name` and `source` are ForceNew upstream (the
    # objects here are named after their content's hash, the file_mounts archive's keyed with
    # the stack's secret: new content is a new name and a new source, one new object).
    BUCKET_OBJECT_TYPE: frozenset({"bucket", "name", "source"}),
}


def replaces(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether Pulumi would replace rather than update in place."""
    changed = {k for k in set(old["inputs"]) | set(new["inputs"])
               if old["inputs"].get(k, MISSING) != new["inputs"].get(k, MISSING)}
    if new["type"] == WORKER_GROUP_TYPE:
        # The body's metadata and labels change in place; its machine replaces the group.
        others = changed - WORKER_GROUP_IN_PLACE - {"body"}
        return bool(others or replaced_keys(old["inputs"], new["inputs"]))
    if new["type"] == CLUSTER_SWEEPER_TYPE:
        return bool(changed & SWEEPER_REPLACE_KEYS)
    if new["type"] == QUEUED_TPU_SLICE_TYPE:
        return bool(queued_slice_replaced_keys(old["inputs"], new["inputs"]))
    return bool(changed & REPLACE_KEYS.get(new["type"], frozenset()))
