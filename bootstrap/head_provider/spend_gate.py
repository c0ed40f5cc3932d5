"""The spend cap's launch check: for a cluster with `provider.spend_cap` (its provider section
says `spend_cap: true`), before the head's provider creates any node, it refuses a launch that
would take the cluster's hourly projection over `max_usd_per_hour`, or any launch while the
head's daemon holds the workers stopped at `max_usd_total`.

The cap and every node type's prices come from the head's metadata `ray-spend-cap` (re-read at
each launch, so a changed cap needs no restart); the projection from every node of the cluster
Ray's GCP provider lists (the head, the workers Pulumi keeps, TPU slices, the autoscaler's own),
each at its type's price for the market it runs at. A launch of a type whose capacity ladder
(provider.capacity, the short form's on-demand fallback included) has a rung other than spot
is priced on-demand, the dearest the rungs may give (reserved and flex-start nodes are priced
at the on-demand list, as `invoke cost` prices them).

A refusal raises Ray's NodeLaunchException (category `SpendCap`). Ray 2.60's v1 autoscaler
logs "Failed to launch ... (SpendCap): <why>", adds it to its events, and `ray status` lists
the type under "Recent failures" as `SpendCap` (`ray status -v` adds why). v2's adapter logs
"Failed to launch N nodes of type T: Node Launch Exception (SpendCap): <why>" and `ray status`
lists the type as `LaunchFailed` (v2 keeps no cause for `-v`). Either way the head is labelled
`ray-spend-refused: <type>` and `ray-spend-refused-at: <time>`, which `invoke status` shows.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ray.autoscaler._private.gcp.node import GCPNodeType
from ray.autoscaler.node_launch_exception import NodeLaunchException
from ray.autoscaler.tags import NODE_KIND_HEAD, TAG_RAY_NODE_KIND, TAG_RAY_USER_NODE_TYPE

from .capacity import ON_DEMAND, SPOT
from .instance_metadata import ApiError, Metadata
from .ladder import ladder_of
from .spend import (
    CAPPED_AT_LABEL,
    CAPPED_LABEL,
    LABEL_TIME_FORMAT,
    PROVIDER_FIELD,
    REFUSED_AT_LABEL,
    REFUSED_LABEL,
    SPEND_CAP_KEY,
    WORKERS_STOPPED,
    Market,
    NodeUsage,
    SpendCap,
    launch_refusal,
    tpu_market,
)

logger = logging.getLogger(__name__)

CATEGORY = "SpendCap"  # Ray shows it in `ray status`; under 20 characters, as Ray asks
_NOT_IN_LABEL = re.compile(r"[^a-z0-9_-]")


class SpendGate:
    """A launch check (HeadNodeProvider.launch_checks) for the provider it is given."""

    def __init__(self, provider: Any, metadata: Metadata | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.provider = provider  # HeadNodeProvider: its `resources` list the cluster
        self.metadata = metadata or Metadata.from_environment()
        self.clock = clock

    def __call__(self, node_config: dict[str, Any], tags: dict[str, str], count: int) -> None:
        if not self.provider.provider_config.get(PROVIDER_FIELD):
            return
        try:
            raw = self.metadata.attribute(SPEND_CAP_KEY)
        except ApiError as exc:
            raise _refusal(f"spend cap: the head's metadata {SPEND_CAP_KEY} cannot be read "
                           f"({exc}): no node is launched until it can") from None
        if not raw:
            return
        cap = SpendCap.from_json(raw)
        now = datetime.fromtimestamp(self.clock(), timezone.utc)
        usages, head = self._cluster(cap, now)
        capped_at = ""
        if head is not None and head.get("labels", {}).get(CAPPED_LABEL) == WORKERS_STOPPED:
            capped_at = head["labels"].get(CAPPED_AT_LABEL, "?")
        node_type = tags.get(TAG_RAY_USER_NODE_TYPE, "")
        reason = launch_refusal(cap, usages, node_type, count,
                                self._market(node_type, node_config), capped_at)
        if reason is not None:
            self._record(head, node_type, now)
            raise _refusal(reason)

    def _market(self, node_type: str, node_config: dict[str, Any]) -> Market:
        if "machineType" not in node_config:  # a TPU node
            return tpu_market(node_config.get("schedulingConfig"))
        # Priced at the dearest market its ladder may give it: spot only if every rung is.
        rungs = ladder_of(self.provider.capacity.get(node_type), node_config)
        return SPOT if all(rung["market"] == SPOT for rung in rungs) else ON_DEMAND

    def _cluster(self, cap: SpendCap, now: datetime) -> tuple[list[NodeUsage], Any]:
        """Every node of the cluster Ray's provider lists, and the head among them."""
        usages, head = [], None
        for kind, resource in self.provider.resources.items():
            for node in resource.list_instances({}):
                item = dict(node)
                if kind == GCPNodeType.TPU:
                    usages.append(NodeUsage.of_tpu_node(item, cap.node_type_label, now))
                    continue
                usages.append(NodeUsage.of_instance(item, cap.node_type_label, now))
                if (item.get("labels") or {}).get(TAG_RAY_NODE_KIND) == NODE_KIND_HEAD:
                    head = node
        return usages, head

    def _record(self, head: Any, node_type: str, now: datetime) -> None:
        """The refusal on the head's labels; a failure there does not change the answer."""
        if head is None:
            return
        labels = {REFUSED_LABEL: _NOT_IN_LABEL.sub("-", node_type.lower())[:63] or "unnamed",
                  REFUSED_AT_LABEL: now.strftime(LABEL_TIME_FORMAT)}
        try:
            self.provider.resources[GCPNodeType.COMPUTE].set_labels(
                head, labels, wait_for_operation=False)
        except Exception as exc:  # noqa: BLE001 - Ray's client raises its own errors
            logger.warning("spend cap: could not label the head with the refusal: %s", exc)


def _refusal(reason: str) -> NodeLaunchException:
    """What Ray turns into a failed launch with this reason (see the module docstring)."""
    logger.warning("%s", reason)
    return NodeLaunchException(CATEGORY, reason, None)
