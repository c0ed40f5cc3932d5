"""A worker group's new nodes walk their type's capacity ladder: each rung (market, zones,
machine type; bootstrap/head_provider/ladder.py makes its body) takes what it can, the rest
go down to the next rung; a node is created once, on one rung.

A rung moves nodes down only on refusals that mean "no capacity here" (a stockout in its three
forms, a per-zone quota, a reservation full or not matching, a flex-start request not filled in
`provision_timeout`): NoCapacity from the API, never a config error, which stops the walk with
what was created named. Reservation rungs read first what each reservation has free
(reservations.py) and send it no more (a reservation shared from another project is not
ours to read: it gets the rest and refuses what it cannot hold); GCE takes one reservation
name per instance, so the nodes are spread across the rung's list in its order. A flex-start
rung's nodes are PENDING until Dynamic Workload Scheduler finds their capacity: those still
PENDING when `provision_timeout` passes are deleted, and those whose request failed are gone;
both go on to the next rung.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bootstrap.head_provider.ladder import (
    ANY_RESERVATION,
    FLEX_START,
    RESERVATION,
    ladder_of,
    rung_body,
)
from infra.workers.apis import Deadlines, clients_for, compute_nodes
from infra.workers.compute_api import ComputeNodes
from infra.workers.nodes import NoCapacity, NodeApi, WorkerGroupError
from infra.workers.reservations import ReservationReader
from infra.workers.retry import RetryPolicy

DEFAULT_PROVISION_TIMEOUT_S = 600.0
"""How long a rung that queues (flex-start) waits when the policy names no timeout."""


class LadderWalk:
    """One create of a group's nodes down its ladder."""

    def __init__(self, props: Mapping[str, Any], retry: RetryPolicy, deadlines: Deadlines,
                 api: NodeApi) -> None:
        self.props, self.retry, self.deadlines, self.api = props, retry, deadlines, api
        self.created: list[str] = []
        self.refusals: list[str] = []
        self.last_refusal: NoCapacity | None = None
        policy = props.get("capacity") or {}
        self.timeout_s = float(policy.get("provision_timeout_s") or DEFAULT_PROVISION_TIMEOUT_S)

    def create(self, names: Sequence[str], body: dict[str, Any]) -> None:
        """Every name on the first rung that takes it; NoCapacity naming every rung's refusal
        when some are left at the bottom."""
        remaining = list(names)
        rungs = ladder_of(self.props.get("capacity"), body)
        for rung in rungs:
            for part, part_body, zone in self._parts(rung, body, remaining):
                made = self._try(rung, part, part_body, zone)
                remaining = [n for n in remaining if n not in made]
            if not remaining:
                return
        if len(rungs) == 1 and self.last_refusal is not None:
            raise self.last_refusal  # no ladder: the API's own words
        if remaining:
            raise NoCapacity(
                f"{len(remaining)} of {len(names)} nodes found no capacity on any rung of "
                f"provider.capacity.{self.props['node_type']} ({'; '.join(self.refusals)}). "
                "Try again later, add rungs (other zones, markets or machine types), or lower "
                "the count", self.created)

    def _parts(self, rung: Mapping[str, Any], body: dict[str, Any], remaining: list[str]
               ) -> list[tuple[list[str], dict[str, Any], str | None]]:
        """(names, body, zone) to insert for this rung: a reservation rung's names spread
        over its reservations by what each has free; others all the names at once."""
        zones = list(rung.get("zones") or [])
        if rung["market"] not in (RESERVATION, ANY_RESERVATION):
            return [(list(remaining), rung_body(body, rung), zones[0] if zones else None)]
        zone = zones[0] if zones else self.props["zone"]
        reader = ReservationReader(self.props["project"], clients_for(self.props), self.retry)
        parts, left = [], list(remaining)
        if rung["market"] == ANY_RESERVATION:
            made = rung_body(body, rung)
            free = reader.any_free(zone, made)
            if not free:
                self.refusals.append(f"any-reservation in {zone}: no matching reservation "
                                     "has room")
            return [(left[:free], made, zone)] if free else []
        for reference in rung["reservations"]:
            made = rung_body(body, rung, reference)
            if reference.startswith("projects/"):
                # Shared from another project: its owner's to read, so asked for all the rest;
                # what it cannot hold it refuses, and those go on.
                parts.append((left, made, zone))
                break
            free = reader.read(zone, reference).free
            if not free:
                self.refusals.append(f"reservation {reference}: full")
                continue
            parts.append((left[:free], made, zone))
            left = left[free:]
            if not left:
                break
        return parts

    def _try(self, rung: Mapping[str, Any], names: list[str], body: dict[str, Any],
             zone: str | None) -> list[str]:
        """Insert on one rung; the names it made."""
        api = self._api_for(rung, zone)
        try:
            api.create(names, body)
        except NoCapacity as refused:
            self.last_refusal = refused
            self.refusals.append(f"{_rung_name(rung)}: {refused.reason}")
            self.created += refused.created
            return list(refused.created)
        except WorkerGroupError as failed:
            raise type(failed)(
                f"{_rung_name(rung)}: {failed.reason}",
                [*self.created, *failed.created]) from None
        if isinstance(api, ComputeNodes) and rung["market"] == FLEX_START:
            started = api.await_started(names, self.timeout_s)
            if len(started) < len(names):
                self.refusals.append(
                    f"{_rung_name(rung)}: {len(names) - len(started)} not started within "
                    f"{self.timeout_s:.0f} s (provision_timeout_minutes) or refused by "
                    "Dynamic Workload Scheduler")
            names = started
        self.created += names
        return names

    def _api_for(self, rung: Mapping[str, Any], zone: str | None) -> NodeApi:
        """The group's API, or one for the rung's zones (a reservation rung: its one zone,
        no failover) and, for a flex-start rung, its provision timeout."""
        zones = list(rung.get("zones") or [])
        pinned = rung["market"] in (RESERVATION, ANY_RESERVATION)
        if not zones and not pinned:
            return self.api
        props = dict(self.props)
        if zone:
            props["zone"] = zone
        if pinned:
            props["fallback_zones"] = False
        elif zones:
            props["fallback_zones"] = zones[1:] or False
        return compute_nodes(props, self.retry, self.deadlines)


def _rung_name(rung: Mapping[str, Any]) -> str:
    where = f" in {', '.join(rung['zones'])}" if rung.get("zones") else ""
    shape = f" as {rung['machine_type']}" if rung.get("machine_type") else ""
    return f"{rung['market']}{shape}{where}"
