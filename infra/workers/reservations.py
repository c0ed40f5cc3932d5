"""What a reservation still holds: read before a ladder's reservation rungs insert, so a group
sends each reservation no more nodes than it has free, and shown by the plan's preflight.

A reservation is zonal; `projects/P/reservations/R` names one project P shares with ours
(read in P: the reservation is P's resource). `specificReservation.count - inUseCount` is what
is free (https://cloud.google.com/compute/docs/reference/rest/v1/reservations).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.api_core import exceptions as api_exceptions

from infra.workers.clients import ApiClients
from infra.workers.nodes import WorkerGroupError
from infra.workers.retry import RetryPolicy, call_with_retry


@dataclass(frozen=True)
class Held:
    """One reservation as read: its size, what is in use, and whether only instances naming
    it may consume it."""

    count: int
    in_use: int
    specific_required: bool
    machine_type: str
    accelerators: tuple[tuple[str, int], ...]

    @property
    def free(self) -> int:
        return max(0, self.count - self.in_use)


def owner_and_name(project: str, reference: str) -> tuple[str, str]:
    """`projects/P/reservations/R` -> (P, R); `R` -> (project, R)."""
    if reference.startswith("projects/"):
        parts = reference.split("/")
        return parts[1], parts[-1]
    return project, reference


def _bare(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def _held(reservation: Mapping[str, Any]) -> Held:
    """A reservation's JSON (int64 counts arrive as strings, absent ones are 0)."""
    specific = reservation.get("specificReservation") or {}
    properties = specific.get("instanceProperties") or {}
    return Held(
        count=int(specific.get("count") or 0), in_use=int(specific.get("inUseCount") or 0),
        specific_required=bool(reservation.get("specificReservationRequired")),
        machine_type=_bare(properties.get("machineType", "")),
        accelerators=tuple(sorted((_bare(a.get("acceleratorType", "")),
                                   int(a.get("acceleratorCount") or 0))
                                  for a in properties.get("guestAccelerators") or [])))


def body_shape(body: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, int], ...]]:
    """An insert body's machine type and GPUs, as a reservation names them."""
    gpus = tuple(sorted((_bare(str(a.get("acceleratorType", ""))),
                         int(a.get("acceleratorCount", 0)))
                        for a in body.get("guestAccelerators") or []))
    return _bare(str(body.get("machineType", ""))), gpus


class ReservationReader:
    """Reads the reservations of one project (and those shared with it)."""

    def __init__(self, project: str, clients: ApiClients, retry: RetryPolicy) -> None:
        self.project, self._clients, self._retry = project, clients, retry

    def read(self, zone: str, reference: str) -> Held:
        """One reservation; a missing one is the config's error, named with the fix."""
        owner, name = owner_and_name(self.project, reference)
        try:
            reservation = call_with_retry(
                lambda: self._clients.compute.call(
                    "reservations.get", project=owner, zone=zone, reservation=name),
                self._retry)
        except (api_exceptions.NotFound, api_exceptions.Forbidden) as missing:
            raise WorkerGroupError(
                f"reservation {reference} cannot be read in {zone} "
                f"({getattr(missing, 'message', missing)}): check the name in provider.capacity "
                f"and the rung's zone against `gcloud compute reservations list --project "
                f"{owner}`, and that {owner} shares it with {self.project}") from None
        return _held(reservation)

    def any_free(self, zone: str, body: Mapping[str, Any]) -> int:
        """How many nodes of `body` ANY_RESERVATION would place in the project's reservations
        of `zone` (those not requiring a specific affinity, of the body's shape)."""
        shape = body_shape(body)
        listed = self._clients.compute.items(
            "reservations.list", self._retry, project=self.project, zone=zone)
        return sum(held.free for held in map(_held, listed)
                   if not held.specific_required
                   and (held.machine_type, held.accelerators) == shape)
