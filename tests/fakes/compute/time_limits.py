"""A VM's time limit in the fake: when it runs out, GCE stops or deletes the VM.

https://cloud.google.com/compute/docs/instances/limit-vm-runtime: a VM with a time limit,
`scheduling.maxRunDuration` (a duration) or `scheduling.terminationTime` (an RFC 3339 time), has
the read-only `resourceStatus.scheduling.terminationTimestamp` ("Time in future when the instance
will be terminated", the compute v1 discovery document's ResourceStatusScheduling) set by
Compute Engine whenever it enters RUNNING, and cleared when it is stopped or suspended; at that
time GCE applies `scheduling.instanceTerminationAction` (DELETE: the VM is deleted; STOP: it is
stopped, TERMINATED). A flex-start VM always has one
(https://cloud.google.com/compute/docs/instances/about-flex-start-vms): it runs at most its
maxRunDuration and is then deleted.

`Faults.run_limit_scale` runs the fake's time limits faster (0.01: a 10-minute limit lasts
6 seconds of the test), so a test sees a VM end without waiting for it; the timestamp says the
scaled end, as the VM really ends then.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.compute.cloud import FakeCloud


def limit_seconds(scheduling: dict[str, Any], now: datetime) -> float | None:
    """How long from `now` the VM may run, by its scheduling (None: no limit)."""
    duration = (scheduling.get("maxRunDuration") or {}).get("seconds")
    if duration:
        return float(duration) + float(scheduling["maxRunDuration"].get("nanos") or 0) / 1e9
    at = scheduling.get("terminationTime")
    if at:
        return max(0.0, (datetime.fromisoformat(at.replace("Z", "+00:00")) - now)
                   .total_seconds())
    return None


def run(cloud: FakeCloud, store: dict[str, dict[str, Any]], name: str) -> Callable[[], None]:
    """The effect that makes the instance RUNNING and starts its time limit, if it has one."""
    def effect() -> None:
        instance = store.get(name)
        if instance is None:
            return
        instance["status"] = "RUNNING"
        now = datetime.now(timezone.utc)
        seconds = limit_seconds(instance.get("scheduling") or {}, now)
        if seconds is None:
            return
        seconds *= cloud.faults.run_limit_scale
        end = (now + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")
        instance.setdefault("resourceStatus", {}).setdefault("scheduling", {})[
            "terminationTimestamp"] = end
        cloud.timers.append((time.monotonic() + seconds, _end(cloud, store, name, end)))
    return effect


def _end(cloud: FakeCloud, store: dict[str, dict[str, Any]], name: str,
         end: str) -> Callable[[], None]:
    def effect() -> None:
        instance = store.get(name)
        scheduling = (instance or {}).get("resourceStatus", {}).get("scheduling", {})
        if instance is None or scheduling.get("terminationTimestamp") != end:
            return  # gone, or stopped and started since: that run has its own end
        del scheduling["terminationTimestamp"]
        if instance["scheduling"].get("instanceTerminationAction") == "STOP":
            instance["status"] = "TERMINATED"
            return
        store.pop(name, None)
        project, zone = str(instance["zone"]).split("/projects/", 1)[1].split("/zones/")
        cloud._release(f"{project}/{zone}/{name}")()
    return effect


def cleared(store: dict[str, dict[str, Any]], name: str) -> Callable[[], None]:
    """The effect of a stop on the time limit: the timestamp is cleared (the next run sets
    a new one)."""
    def effect() -> None:
        (store.get(name) or {}).get("resourceStatus", {}).get("scheduling", {}).pop(
            "terminationTimestamp", None)
    return effect
