"""`provider.capacity.<node type>`: how a worker type gets capacity, as one ordered ladder.

The long form names the rungs, tried in order until every node has a place:

    provider:
      capacity:
        gpu_worker:
          provision_timeout_minutes: 20   # bounds a rung that queues (flex-start)
          ladder:
            - market: reservation         # specific reservations, nodes spread across them
              reservations: [a100-res, projects/shared-proj/reservations/a100-pool]
            - market: any-reservation     # any matching reservation of the project
            - market: spot
              zones: [us-central1-a, us-central1-b]
            - market: flex-start          # Dynamic Workload Scheduler, at most 7 days
              max_run_duration_hours: 24
            - market: on-demand
              machine_type: a2-highgpu-2g # another shape of the same node type

The short form `{fallback: on-demand, return_to_spot: bool}` of a spot type stays what it was:
the ladder [spot, on-demand]. Under `provider`, not in the node type, because Ray's schema
refuses unknown node type keys; model/config/cluster.py removes it from the config Ray reads.
The rules a rung's body follows live in bootstrap/head_provider/ladder.py (shared with the head).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Market = Literal["reservation", "any-reservation", "spot", "flex-start", "on-demand"]
MARKETS: tuple[str, ...] = Market.__args__  # type: ignore[attr-defined]
"""The same words, in the same order, as bootstrap/head_provider/ladder.py's MARKETS (the
model imports nothing of bootstrap; a test holds the two together)."""
RESERVATION = "reservation"
FLEX_MAX_RUN_S = 7 * 24 * 3600
"""A flex-start VM runs for at most seven days."""
_RESERVATION_PATH = r"^([a-z][-a-z0-9]{0,61}[a-z0-9]?|projects/[^/]+/reservations/[a-z][-a-z0-9]*)$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


class Rung(_Strict):
    """One rung of a ladder: where (zones), what (machine type) and how (market)."""

    market: Market
    zones: list[str] | None = None
    """Where this rung is tried, in order; absent: availability_zone, then the failover zones
    (provider.fallback_zones). A reservation rung is tried in its first zone only (a
    reservation is zonal)."""
    reservations: list[str] | None = None
    """A `reservation` rung's reservations: a name in the project, or
    `projects/P/reservations/R` for one P shares with this project."""
    machine_type: str | None = None
    """Another machine type for this rung (the node type's resources stay as written)."""
    max_run_duration_hours: float | None = Field(default=None, gt=0, le=FLEX_MAX_RUN_S / 3600)
    """A `flex-start` rung's run limit (GCE deletes the node then): default and most 168."""

    @field_validator("market", mode="before")
    @classmethod
    def _market_word(cls, value: Any) -> Any:
        if value not in MARKETS:
            raise ValueError(f"{value!r} is not a market: write one of {', '.join(MARKETS)}")
        return value

    @field_validator("reservations")
    @classmethod
    def _reservation_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            if not re.match(_RESERVATION_PATH, name):
                raise ValueError(f"{name!r} is not a reservation: write its name (a100-res) or, "
                                 "for one shared from another project, "
                                 "projects/OTHER_PROJECT/reservations/NAME")
        return value

    @model_validator(mode="after")
    def _fits_market(self) -> Rung:
        if self.market == RESERVATION and not self.reservations:
            raise ValueError("a reservation rung names its reservations: add `reservations: "
                             "[NAME, ...]`, or write `market: any-reservation` for any "
                             "matching one")
        if self.market != RESERVATION and self.reservations:
            raise ValueError(f"only a reservation rung takes reservations: remove them from "
                             f"this {self.market} rung, or write `market: reservation`")
        if self.market != "flex-start" and self.max_run_duration_hours is not None:
            raise ValueError("only a flex-start rung takes max_run_duration_hours: remove it")
        return self

    def as_input(self) -> dict[str, Any]:
        """The rung as the worker group and the head's provider take it."""
        rung: dict[str, Any] = {"market": self.market}
        if self.zones:
            rung["zones"] = list(self.zones)
        if self.reservations:
            rung["reservations"] = list(self.reservations)
        if self.machine_type:
            rung["machine_type"] = self.machine_type
        if self.market == "flex-start":
            hours = self.max_run_duration_hours
            rung["max_run_duration_s"] = int(hours * 3600) if hours else FLEX_MAX_RUN_S
        return rung


class Capacity(_Strict):
    """`provider.capacity.<node type>`: the short form (`fallback: on-demand`, spot types
    only: when every allowed zone refuses spot for capacity, the missing workers are made
    on-demand; `return_to_spot: true` replaces pinned on-demand ones by spot at a later up)
    or the `ladder` form (see the module)."""

    fallback: Literal["on-demand"] | None = None
    return_to_spot: bool = False
    ladder: list[Rung] | None = None
    provision_timeout_minutes: float | None = Field(default=None, gt=0, le=7 * 24 * 60)
    """How long one rung that queues (flex-start) may take before its nodes are given up
    and the next rung is tried; default 10 minutes."""

    @field_validator("fallback", mode="before")
    @classmethod
    def _fallback_word(cls, value: Any) -> Any:
        if value is not None and value != "on-demand":
            raise ValueError(
                f"{value!r} is not a fallback: write `fallback: on-demand` (the one market a "
                "spot type can fall back to), or leave the type out of provider.capacity"
            )
        return value

    @field_validator("ladder", mode="before")
    @classmethod
    def _ladder_form(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, list) or not value):
            raise ValueError("use a list of rungs, e.g. [{market: spot}, {market: on-demand}]")
        return value

    @model_validator(mode="after")
    def _one_form(self) -> Capacity:
        if self.ladder is None and self.fallback is None:
            raise ValueError("write `fallback: on-demand` (spot, else on-demand) or a "
                             "`ladder:` of rungs")
        if self.ladder is not None and (self.fallback or self.return_to_spot):
            raise ValueError("write either `fallback: on-demand` or a `ladder:`, not both: "
                             "the ladder [{market: spot}, {market: on-demand}] is the fallback")
        return self

    @property
    def is_ladder(self) -> bool:
        return self.ladder is not None

    def as_input(self) -> dict[str, Any]:
        """The policy as the worker group and the head's provider take it: the short form
        exactly as before the ladder existed (existing stacks see no change)."""
        if self.ladder is None:
            return {"fallback": self.fallback, "return_to_spot": self.return_to_spot}
        policy: dict[str, Any] = {"ladder": [rung.as_input() for rung in self.ladder]}
        if self.provision_timeout_minutes:
            policy["provision_timeout_s"] = int(self.provision_timeout_minutes * 60)
        return policy
