"""Zone failover: which other zones of the region may take a group's workers, and how a body
moves there.

A GCE zone can be out of a machine or GPU type (`ZONE_RESOURCE_POOL_EXHAUSTED`) while the next
zone of the same region has plenty. The subnet is regional, so a worker in another zone reaches
the head like any other. The head stays where it is; only the workers that did not fit move.

`provider.fallback_zones` (see model/config) arrives here as the group's `fallback_zones`:
None means every zone of the region, `False` none, a list exactly those zones, in its order.
A zone is tried only if it offers the body's machine type and every accelerator type.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from google.api_core import exceptions as api_exceptions

from bootstrap.head_provider.ladder import is_capacity_refusal
from infra.workers.clients import ApiClients
from infra.workers.parallel import run_all, short_error
from infra.workers.retry import RetryPolicy, call_with_retry

FallbackZones = list[str] | bool | None
T = TypeVar("T")

_ZONE_SEGMENT = re.compile(r"(^|/)zones/[^/]+/")


def region_of(zone: str) -> str:
    """`us-west1-a` -> `us-west1`."""
    return zone.rsplit("-", 1)[0]


class ZoneRefused(Exception):
    """An insert call the zone refused outright for capacity (an HTTP 503 can say so): not a
    transient fault to retry in the same zone, but a reason to try the next."""


def refused_for_capacity(call: Callable[[], T]) -> Callable[[], T]:
    """`call`, with a capacity refusal raised as ZoneRefused, which no retry loop retries."""

    def guarded() -> T:
        try:
            return call()
        except api_exceptions.GoogleAPICallError as exc:
            if is_capacity_refusal(short_error(exc)):
                raise ZoneRefused(short_error(exc)) from exc
            raise

    return guarded


def body_in_zone(body: dict[str, Any], zone: str) -> dict[str, Any]:
    """The insert body with its zonal URLs (machine, accelerator and disk types) in `zone`."""

    def move(url: str) -> str:
        return _ZONE_SEGMENT.sub(lambda m: f"{m.group(1)}zones/{zone}/", url)

    moved = dict(body)
    if body.get("machineType"):
        moved["machineType"] = move(str(body["machineType"]))
    if body.get("guestAccelerators"):
        moved["guestAccelerators"] = [
            {**accelerator, "acceleratorType": move(accelerator["acceleratorType"])}
            for accelerator in body["guestAccelerators"]
        ]
    if body.get("disks"):
        moved["disks"] = [_disk_in(disk, move) for disk in body["disks"]]
    return moved


def _disk_in(disk: dict[str, Any], move: Callable[[str], str]) -> dict[str, Any]:
    params = disk.get("initializeParams")
    if not params or not params.get("diskType"):
        return disk
    return {**disk, "initializeParams": {**params, "diskType": move(params["diskType"])}}


def bare(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


class ZoneFinder:
    """The zones a group may fail over to, asked of the API only when failover is needed."""

    def __init__(
        self,
        project: str,
        zone: str,
        fallback_zones: FallbackZones,
        clients: ApiClients,
        retry: RetryPolicy,
    ) -> None:
        self.project, self.zone, self.fallback = project, zone, fallback_zones
        self._clients, self._retry = clients, retry
        self.skipped: list[str] = []
        """Zones left out because they do not offer the body's types (for the error)."""

    def fallbacks(self, body: dict[str, Any]) -> list[str]:
        """Other zones, in a stable order, that offer every type the body names."""
        if self.fallback is False:
            return []
        if isinstance(self.fallback, list):
            candidates = [z for z in dict.fromkeys(self.fallback) if z != self.zone]
        else:
            candidates = [z for z in self._region_zones() if z != self.zone]
        offered, failures = run_all(candidates, lambda zone: self._offers(zone, body))
        if failures:
            raise next(iter(failures.values()))
        self.skipped = [zone for zone in candidates if not offered[zone]]
        return [zone for zone in candidates if offered[zone]]

    def _region_zones(self) -> list[str]:
        """The region's zones that are UP, by name."""
        region = region_of(self.zone)
        zones = self._clients.compute.items("zones.list", self._retry, project=self.project)
        return sorted(z["name"] for z in zones
                      if bare(z.get("region", "")) == region and z.get("status", "") in ("UP", ""))

    def _offers(self, zone: str, body: dict[str, Any]) -> bool:
        lookups: list[tuple[str, dict[str, str]]] = []
        if body.get("machineType"):
            lookups.append(("machineTypes.get", {"machineType": bare(body["machineType"])}))
        for accelerator in body.get("guestAccelerators") or []:
            lookups.append(
                ("acceleratorTypes.get", {"acceleratorType": bare(accelerator["acceleratorType"])})
            )
        return all(self._exists(method, zone, key) for method, key in lookups)

    def _exists(self, method: str, zone: str, key: dict[str, str]) -> bool:
        try:
            call_with_retry(
                lambda: self._clients.compute.call(
                    method, project=self.project, zone=zone, **key),
                self._retry,
            )
        except api_exceptions.NotFound:
            return False
        return True


def describe_skipped(skipped: Sequence[str], body: dict[str, Any]) -> str:
    if not skipped:
        return ""
    types = [bare(str(body.get("machineType", "")))]
    types += [bare(a["acceleratorType"]) for a in body.get("guestAccelerators") or []]
    return f"; {', '.join(skipped)} do not offer {' + '.join(t for t in types if t)}"
