"""The fake's zonal reservations and flex-start rules: what an instance insert consumes, and
what GCE refuses.

Reservations (https://cloud.google.com/compute/docs/reference/rest/v1/reservations): a zonal
resource with `specificReservation.count` / `inUseCount` and `instanceProperties` (machine type,
GPUs); `specificReservationRequired` (only instances naming it may consume it);
`shareSettings` (`LOCAL`, or `SPECIFIC_PROJECTS` with a `projectMap` of the projects that may
consume it). Consuming (https://cloud.google.com/compute/docs/instances/reservations-consume):
an instance's `reservationAffinity` is `ANY_RESERVATION` (the default: any matching reservation
without specificReservationRequired, else no reservation at all), `SPECIFIC_RESERVATION` (key
`compute.googleapis.com/reservation-name`, values: one name, or
`projects/P/reservations/R` for one shared from project P in the same zone,
https://cloud.google.com/compute/docs/reference/rest/v1/ReservationAffinity) or
`NO_RESERVATION`. Spot and flex-start VMs cannot consume reservations (the same page's
limitations). A SPECIFIC_RESERVATION naming a reservation without specificReservationRequired
is refused as GCE refuses it (`Specified reservations [...] can not be targeted as
specificReservationRequired is not set`, quoted in skypilot-org/skypilot#3327); the same
`Specified reservations [...]` form is used for a missing, unshared, full or non-matching one
(Google does not document those texts).

Flex-start (https://cloud.google.com/compute/docs/instances/about-flex-start-vms,
https://cloud.google.com/compute/docs/instances/create-flex-start-vm): `provisioningModel:
FLEX_START` with an `instanceTerminationAction`, a `maxRunDuration` of at most seven days and
`NO_RESERVATION`. The instance exists at once, in status PENDING ("waiting for available
capacity from Dynamic Workload Scheduler", the Instance status enum of the compute v1 discovery
document); after `Faults.flex_start_s` it runs, or, when DWS found no capacity
(`Faults.flex_capacity`), its request fails and it is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.fakes.compute.errors import COMPUTE, ApiError

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
FLEX_MAX_RUN_S = 7 * 24 * 3600


@dataclass
class Reservation:
    project: str
    zone: str
    name: str
    count: int
    machine_type: str
    accelerators: list[dict[str, Any]] = field(default_factory=list)
    specific_required: bool = True
    shared_with: list[str] = field(default_factory=list)
    """Projects besides the owner that may consume it (shareType SPECIFIC_PROJECTS)."""
    consumers: set[str] = field(default_factory=set)
    """`project/zone/instance` of the instances consuming it."""

    @property
    def path(self) -> str:
        return f"projects/{self.project}/reservations/{self.name}"

    @property
    def free(self) -> int:
        return self.count - len(self.consumers)

    def json(self) -> dict[str, Any]:
        share: dict[str, Any] = {"shareType": "SPECIFIC_PROJECTS" if self.shared_with
                                 else "LOCAL"}
        if self.shared_with:
            share["projectMap"] = {p: {"projectId": p} for p in self.shared_with}
        scope = f"projects/{self.project}/zones/{self.zone}"
        return {
            "kind": "compute#reservation", "name": self.name, "status": "READY",
            "zone": f"{COMPUTE}/{scope}",
            "selfLink": f"{COMPUTE}/{scope}/reservations/{self.name}",
            "specificReservationRequired": self.specific_required,
            "shareSettings": share,
            "specificReservation": {
                "count": str(self.count), "inUseCount": str(len(self.consumers)),
                "instanceProperties": {"machineType": self.machine_type,
                                       "guestAccelerators": self.accelerators}},
        }

    def matches(self, body: dict[str, Any]) -> bool:
        """The instance has the reservation's machine type and GPUs."""
        machine = str(body.get("machineType", "")).rsplit("/", 1)[-1]
        gpus = sorted((str(a.get("acceleratorType", "")).rsplit("/", 1)[-1],
                       int(a.get("acceleratorCount", 0)))
                      for a in body.get("guestAccelerators") or [])
        wanted = sorted((str(a["acceleratorType"]).rsplit("/", 1)[-1],
                         int(a["acceleratorCount"])) for a in self.accelerators)
        return machine == self.machine_type and gpus == wanted


def _refusal(paths: list[str], why: str) -> ApiError:
    return ApiError(400, f"Invalid value for field 'resource.reservationAffinity': "
                         f"Specified reservations [{', '.join(paths)}] {why}")


class Reservations:
    """Every reservation of the fake, by (project, zone, name); the caller holds the lock."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, str, str], Reservation] = {}

    def add(self, project: str, zone: str, name: str, count: int, machine_type: str,
            **options: Any) -> Reservation:
        reservation = Reservation(project, zone, name, count, machine_type, **options)
        self.by_key[(project, zone, name)] = reservation
        return reservation

    def in_zone(self, project: str, zone: str) -> list[Reservation]:
        return [r for (p, z, _), r in self.by_key.items() if p == project and z == zone]

    def get(self, project: str, zone: str, name: str) -> Reservation:
        found = self.by_key.get((project, zone, name))
        if found is None:
            raise ApiError(404, f"The resource 'projects/{project}/zones/{zone}/reservations/"
                                f"{name}' was not found", "notFound")
        return found

    def to_consume(self, project: str, zone: str, body: dict[str, Any], count: int
                   ) -> tuple[Reservation | None, int]:
        """The reservation `count` instances of `body` would consume and how many of them it
        takes (the rest are refused), or (None, count) for instances that consume none;
        ApiError for what GCE refuses outright."""
        affinity = body.get("reservationAffinity") or {}
        kind = affinity.get("consumeReservationType") or "ANY_RESERVATION"
        scheduling = body.get("scheduling") or {}
        model = scheduling.get("provisioningModel")
        cannot = model in ("SPOT", "FLEX_START") or scheduling.get("preemptible") is True
        if kind == "NO_RESERVATION":
            return None, count
        if kind == "SPECIFIC_RESERVATION":
            if cannot:
                raise ApiError(400, "Invalid value for field 'resource.reservationAffinity': "
                                    "Spot, preemptible and flex-start instances cannot consume "
                                    "reservations.")
            return self._specific(project, zone, body, affinity, count)
        if kind != "ANY_RESERVATION":
            raise ApiError(400, f"Invalid value for field 'resource.reservationAffinity."
                                f"consumeReservationType': '{kind}'")
        if cannot:
            return None, count
        for reservation in self.in_zone(project, zone) + self.shared_into(project, zone):
            if not reservation.specific_required and reservation.free > 0 \
                    and reservation.matches(body):
                return reservation, min(count, reservation.free)
        return None, count

    def shared_into(self, project: str, zone: str) -> list[Reservation]:
        return [r for r in self.by_key.values()
                if r.zone == zone and r.project != project and project in r.shared_with]

    def _specific(self, project: str, zone: str, body: dict[str, Any],
                  affinity: dict[str, Any], count: int) -> tuple[Reservation, int]:
        values = affinity.get("values") or []
        if affinity.get("key") != RESERVATION_KEY or len(values) != 1:
            raise ApiError(400, "Invalid value for field 'resource.reservationAffinity': "
                                f"SPECIFIC_RESERVATION needs key {RESERVATION_KEY} and one "
                                "reservation name in values.")
        value = str(values[0])
        owner, name = (value.split("/")[1], value.rsplit("/", 1)[-1]) \
            if value.startswith("projects/") else (project, value)
        path = f"projects/{owner}/reservations/{name}"
        reservation = self.by_key.get((owner, zone, name))
        if reservation is None:
            raise _refusal([path], "do not exist.")
        if owner != project and project not in reservation.shared_with:
            raise _refusal([path], f"are not shared with project {project}.")
        if not reservation.specific_required:
            raise _refusal([path], "can not be targeted as specificReservationRequired is "
                                   "not set")
        if not reservation.matches(body):
            raise _refusal([path], "do not match the instance's machine type and "
                                   "accelerators.")
        if reservation.free == 0:
            raise _refusal([path], "do not have enough resources available to fulfill the "
                                   "request.")
        return reservation, min(count, reservation.free)


def check_flex_start(body: dict[str, Any]) -> bool:
    """A flex-start insert, refusing one without what GCE requires of it."""
    scheduling = body.get("scheduling") or {}
    if scheduling.get("provisioningModel") != "FLEX_START":
        return False
    field = "resource.scheduling"
    if scheduling.get("instanceTerminationAction") not in ("DELETE", "STOP"):
        raise ApiError(400, f"Invalid value for field '{field}.instanceTerminationAction': "
                            "FLEX_START instances need DELETE or STOP.")
    seconds = int((scheduling.get("maxRunDuration") or {}).get("seconds") or 0)
    if not 0 < seconds <= FLEX_MAX_RUN_S:
        raise ApiError(400, f"Invalid value for field '{field}.maxRunDuration': FLEX_START "
                            f"instances need one of at most {FLEX_MAX_RUN_S} seconds.")
    affinity = (body.get("reservationAffinity") or {}).get("consumeReservationType")
    if affinity != "NO_RESERVATION":
        raise ApiError(400, "Invalid value for field 'resource.reservationAffinity': "
                            "FLEX_START instances need NO_RESERVATION.")
    return True
