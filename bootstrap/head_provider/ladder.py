"""The capacity ladder, as pure rules: the ordered rungs a node type's nodes are tried on, the
insert body each rung makes of the node type's body, and which refusals move a node down.

A rung is a mapping (the `ladder` entries of `provider.capacity.<type>`, as model/config
dumps them): `market` (one of MARKETS), and optionally `zones` (where the rung is tried; absent,
the group's zone and its failover zones), `reservations` (a `reservation` rung's names: a name
in the project, or `projects/P/reservations/R` for one shared from project P; GCE takes one
name per instance, so nodes are spread across the list), `machine_type` (another shape of the
same node type) and `max_run_duration_s` (a flex-start rung's run limit).

The short form `{fallback: on-demand}` is the ladder [spot, on-demand]; no policy is the one
rung the body itself asks for. Shared by the workers Pulumi keeps (infra/workers) and the head's
autoscaled workers (launch.py). Standard library only.

GCE's rules the bodies follow (https://cloud.google.com/compute/docs/instances/reservations-consume,
https://cloud.google.com/compute/docs/instances/about-flex-start-vms,
https://cloud.google.com/compute/docs/reference/rest/v1/instances): a reservation is consumed
through `reservationAffinity` (`SPECIFIC_RESERVATION` with key
`compute.googleapis.com/reservation-name` and the name as its one value, or
`ANY_RESERVATION`); Spot and flex-start VMs cannot consume reservations (`NO_RESERVATION`); a
flex-start VM is `provisioningModel: FLEX_START` with an `instanceTerminationAction` and a
`maxRunDuration` of at most seven days, and, like every GPU VM, terminates on host maintenance.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .capacity import (
    CAPACITY_LABEL,
    SPOT,
    falls_back,
    is_zone_capacity_error,
    market_of,
)

RESERVATION = "reservation"
ANY_RESERVATION = "any-reservation"
FLEX_START = "flex-start"
ON_DEMAND_RUNG = "on-demand"
MARKETS = (RESERVATION, ANY_RESERVATION, SPOT, FLEX_START, ON_DEMAND_RUNG)
"""Every market a rung may name, cheapest-to-keep first (a scale-down removes the last first)."""

RESERVATION_LABEL = "ray-reservation"
"""A node made from a specific reservation carries its name (the last path segment)."""
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
FLEX_MAX_RUN_S = 7 * 24 * 3600
"""A flex-start VM runs for at most seven days."""

_SPOT_ONLY = ("preemptible", "instanceTerminationAction", "maxRunDuration", "terminationTime",
              "onInstanceStopAction")
# Refusals that mean "this reservation has nothing for this node": full, or not matching its
# shape. Not a missing reservation or one that cannot be targeted: those are config errors.
_RESERVATION_REFUSAL = re.compile(
    r"reservation.*(not have enough|insufficient|exhausted|do(es)? not match)", re.I | re.S)


def ladder_of(policy: Mapping[str, Any] | None, body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rungs a node of `body` is tried on, in order, under its type's capacity policy."""
    if policy and policy.get("ladder"):
        return [dict(rung) for rung in policy["ladder"]]
    if falls_back(policy, body):
        return [{"market": SPOT, "short_form": True},
                {"market": ON_DEMAND_RUNG, "short_form": True}]
    return [{"market": market_of(body.get("scheduling")), "short_form": True}]


def is_capacity_refusal(error: str) -> bool:
    """A refusal that means "no capacity on this rung": a stockout in any of its forms (a
    flex-start request GCE could not fill is one), a per-zone quota, a reservation full or not
    matching. Anything else (a bad field, a missing reservation, a permission) is the
    config's."""
    return is_zone_capacity_error(error) or bool(_RESERVATION_REFUSAL.search(error))


def reservation_name(reference: str) -> str:
    """`projects/P/reservations/R` or `R` -> `R`."""
    return reference.rstrip("/").rsplit("/", 1)[-1]


def rung_body(body: Mapping[str, Any], rung: Mapping[str, Any],
              reservation: str | None = None) -> dict[str, Any]:
    """`body` as the rung asks for it, labelled with the market its nodes get (and a
    reservation rung's nodes with their reservation): `reservation` is the one name of the
    rung's list these nodes consume."""
    market = rung["market"]
    if rung.get("short_form"):
        # The short form keeps the body's own scheduling (and reservation affinity) as
        # before the ladder: spot as written, on-demand as its STANDARD twin.
        made = dict(body) if market == SPOT else _standard(body)
        return _labelled(made, market, None)
    made = _standard(body) if market != SPOT else dict(body)
    if rung.get("machine_type"):
        made["machineType"] = _with_last(str(body.get("machineType", "")), rung["machine_type"])
    scheduling = dict(made.get("scheduling") or {})
    if market == SPOT:
        scheduling = {k: v for k, v in scheduling.items() if k != "preemptible"}
        scheduling["provisioningModel"] = "SPOT"
        made["reservationAffinity"] = {"consumeReservationType": "NO_RESERVATION"}
    elif market == FLEX_START:
        scheduling.update({
            "provisioningModel": "FLEX_START", "instanceTerminationAction": "DELETE",
            "onHostMaintenance": "TERMINATE",
            "maxRunDuration": {"seconds": str(int(rung.get("max_run_duration_s")
                                                  or FLEX_MAX_RUN_S))}})
        made["reservationAffinity"] = {"consumeReservationType": "NO_RESERVATION"}
    elif market == RESERVATION:
        if not reservation:
            raise ValueError("a reservation rung's body needs the reservation it consumes")
        made["reservationAffinity"] = {"consumeReservationType": "SPECIFIC_RESERVATION",
                                       "key": RESERVATION_KEY, "values": [reservation]}
    elif market == ANY_RESERVATION:
        made["reservationAffinity"] = {"consumeReservationType": "ANY_RESERVATION"}
    else:
        made["reservationAffinity"] = dict(
            body.get("reservationAffinity") or {"consumeReservationType": "NO_RESERVATION"})
    made["scheduling"] = scheduling
    return _labelled(made, market, reservation)


def ladder_zones(policies: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every zone the ladders of `policies` (node type -> capacity policy) name, in order."""
    zones: list[str] = []
    for policy in policies.values():
        for rung in policy.get("ladder") or []:
            zones += [zone for zone in rung.get("zones") or [] if zone not in zones]
    return zones


def rung_zones(rung: Mapping[str, Any]) -> list[str | None]:
    """Where a rung is tried, in order (None: the provider's own zone); a reservation rung in
    its first zone only (a reservation is zonal)."""
    zones: list[str | None] = list(rung.get("zones") or [None])
    return zones[:1] if rung["market"] == RESERVATION else zones


_ZONAL = re.compile(r"(^|/)zones/[^/]+/")


def in_zone(body: Mapping[str, Any], zone: str | None) -> dict[str, Any]:
    """`body` for an instance in `zone`: the zonal URLs it may carry (machine type, GPU types,
    disk types) point there; None: as it is."""
    made = dict(body)
    if zone is None:
        return made

    def moved(url: Any) -> Any:
        return _ZONAL.sub(rf"\1zones/{zone}/", url) if isinstance(url, str) else url

    if "machineType" in made:
        made["machineType"] = moved(made["machineType"])
    made["guestAccelerators"] = [{**gpu, "acceleratorType": moved(gpu.get("acceleratorType"))}
                                 for gpu in made.get("guestAccelerators") or []]
    if not made["guestAccelerators"]:
        del made["guestAccelerators"]
    disks = []
    for disk in made.get("disks") or []:
        params = dict(disk.get("initializeParams") or {})
        if "diskType" in params:
            params["diskType"] = moved(params["diskType"])
        disks.append({**disk, "initializeParams": params} if params else dict(disk))
    if disks:
        made["disks"] = disks
    return made


def _standard(body: Mapping[str, Any]) -> dict[str, Any]:
    scheduling = {k: v for k, v in (body.get("scheduling") or {}).items() if k not in _SPOT_ONLY}
    return {**body, "scheduling": {**scheduling, "provisioningModel": "STANDARD"}}


def _labelled(body: dict[str, Any], market: str, reservation: str | None) -> dict[str, Any]:
    labels = {k: v for k, v in (body.get("labels") or {}).items() if k != RESERVATION_LABEL}
    labels[CAPACITY_LABEL] = market
    if reservation:
        labels[RESERVATION_LABEL] = _label_value(reservation_name(reservation))
    return {**body, "labels": labels}


def _label_value(text: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]


def _with_last(url: str, name: str) -> str:
    """A machine type URL (or bare name) with its last segment `name`."""
    return f"{url.rsplit('/', 1)[0]}/{name}" if "/" in url else name


def rank(market: str) -> int:
    """Where a market stands on the ladder of MARKETS: a scale-down removes the highest first."""
    return MARKETS.index(market) if market in MARKETS else len(MARKETS)
