"""A node's end: the time GCE stops or deletes a VM with a time limit (every flex-start VM has
one), as pure rules: where the API says it, how long is left, the label that carries it to Ray
and to `invoke status`, and when the head warns.

Compute Engine sets the read-only `resourceStatus.scheduling.terminationTimestamp` whenever a
VM with a time limit (`scheduling.maxRunDuration` or `terminationTime`) enters RUNNING, and
applies `scheduling.instanceTerminationAction` then
(https://cloud.google.com/compute/docs/instances/limit-vm-runtime). A flex-start VM runs at
most its maxRunDuration and is deleted
(https://cloud.google.com/compute/docs/instances/about-flex-start-vms).

The head's daemon (bootstrap/autostop.py) labels each such node `ray-ends-at` (a label value:
LABEL_TIME_FORMAT), which Ray's GCP provider reports as one of the node's tags (so the
autoscaler, `ray.autoscaler.sdk` users and the head's provider see it), warns WARN_BEFORE_S
before the end in its log (and in the head's guest attribute `ray-capacity/ending`), and the
spend accounting (spend.py, whose `end_of` reads the end) counts such a node only up to its
end. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from .spend import LABEL_TIME_FORMAT, end_of

__all__ = ["END_LABEL", "ENDING_ATTRIBUTE", "WARN_BEFORE_S", "action_of", "end_label",
           "end_of", "left", "warning"]

END_LABEL = "ray-ends-at"
ENDING_ATTRIBUTE = "ray-capacity/ending"
WARN_BEFORE_S = 600.0
"""How long before a node's end the head warns (10 minutes)."""


def end_label(end: datetime) -> str:
    return end.astimezone(timezone.utc).strftime(LABEL_TIME_FORMAT)


def action_of(item: Mapping[str, Any]) -> str:
    """What GCE does at the end: `deleted` or `stopped`."""
    scheduling = item.get("scheduling") or {}
    return "stopped" if scheduling.get("instanceTerminationAction") == "STOP" else "deleted"


def left(end: datetime, now: datetime) -> str:
    """`2h 05m left`, `4m 10s left`, or `ended`."""
    seconds = int((end - now).total_seconds())
    if seconds <= 0:
        return "ended"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours >= 24:
        return f"{hours // 24}d {hours % 24}h left"
    return f"{hours}h {minutes:02d}m left" if hours else f"{minutes}m {secs:02d}s left"


def warning(name: str, node_type: str, item: Mapping[str, Any], end: datetime,
            now: datetime) -> str:
    """The head's line about a node near its end."""
    return (f"{name} ({node_type or 'no type'}) ends at "
            f"{end.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC ({left(end, now)}): GCE has "
            f"it {action_of(item)} then (its time limit, scheduling.maxRunDuration); the tasks "
            "and actors on it will be lost, so checkpoint or move the work now")
