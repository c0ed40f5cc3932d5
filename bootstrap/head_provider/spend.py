"""What a cluster's nodes cost over time: the hours a node ran by its own timestamps, the
market it runs at, the cluster's hourly projection, the ledger the head keeps of what it has
spent, and whether a launch would break the spend cap.

Standard library only (and `capacity` beside it): `invoke cost` uses it, and on the head the
node provider (`provider.py`'s launch check) and the daemon (bootstrap/autostop.py, which ships
a copy of this package in its own zip) run it, where neither the project's packages nor PyYAML
are. The prices come in as plain numbers, rendered at plan time from model.prices into the
head's metadata `ray-spend-cap` (bootstrap/spend_metadata.py).

Hours run: since creation, minus the one stopped period the timestamps show (between the last
stop and a later start). An instance stopped and started more than once shows only its last
stop, so earlier stopped periods count as running: the figure is an upper bound then. Disks
cost from creation on, stopped or not.

The ledger (a JSON file on the head) is what the head has counted: when it is first written,
every node then listed is counted from its creation by the rule above; from then on each check
adds, for each node listed, what it cost since the previous check (its run periods within that
interval at its running price, its disks throughout). So a worker the autoscaler deleted
between two checks still counts up to the check before, and the total survives a restart of
the daemon (or of the head: the file is on its disk).

A node with a time limit (every flex-start VM: `resourceStatus.scheduling.terminationTimestamp`,
time_limit.py) counts up to its end and no further, and in the hourly projection only for the
part of the coming hour it still has: GCE ends it then, whatever the daemon last saw.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .capacity import ON_DEMAND, SPOT, Market, market_of

SPEND_CAP_KEY = "ray-spend-cap"  # the head's metadata: SpendCap.from_json reads it
PROVIDER_FIELD = "spend_cap"
"""The head's provider section: true when the cluster has a cap (its launches are checked)."""
# On the head instance, set by the daemon while the workers are stopped at the total cap
# (`workers-stopped`) and by the launch check when it refuses one (the node type, and when).
CAPPED_LABEL = "ray-spend-cap"
CAPPED_AT_LABEL = "ray-spend-cap-at"
WORKERS_STOPPED = "workers-stopped"
REFUSED_LABEL = "ray-spend-refused"
REFUSED_AT_LABEL = "ray-spend-refused-at"
LABEL_TIME_FORMAT = "%Y-%m-%dt%H-%M-%Sz"  # a label value: lowercase, no colons

_FRACTION = re.compile(r"\.(\d+)")
# Billed as running: GCE instance and TPU node states between start and stop.
RUNNING_STATES = frozenset({"PROVISIONING", "STAGING", "RUNNING", "REPAIRING", "STOPPING",
                            "SUSPENDING", "READY", "CREATING", "STARTING", "RESTARTING"})


def tpu_market(scheduling_config: Mapping[str, Any] | None) -> Market:
    """A TPU node's market, by its `schedulingConfig` (spot or preemptible is spot)."""
    scheduling = scheduling_config or {}
    return SPOT if scheduling.get("spot") or scheduling.get("preemptible") else ON_DEMAND


def parse_time(value: str | None) -> datetime | None:
    """A GCE or TPU timestamp (`2026-12-05T01:02:03.456-08:00`, `...123456789Z`); the
    fraction is cut to microseconds, which Python before 3.11 requires (a head's python3)."""
    if not value:
        return None
    text = _FRACTION.sub(lambda match: "." + match.group(1)[:6].ljust(6, "0"),
                         value.replace("Z", "+00:00"))
    return datetime.fromisoformat(text)


def end_of(item: Mapping[str, Any]) -> datetime | None:
    """When GCE ends this instance (its REST JSON: `resourceStatus.scheduling.
    terminationTimestamp`), or None: no time limit, or not running."""
    status = item.get("resourceStatus") or {}
    return parse_time((status.get("scheduling") or {}).get("terminationTimestamp"))


def run_periods(state: str, created: datetime, last_start: datetime | None,
                last_stop: datetime | None, now: datetime) -> list[tuple[datetime, datetime]]:
    """When the node ran, as far as its timestamps tell (see the module docstring)."""
    if state not in RUNNING_STATES:
        return [(created, last_stop or created)]
    if last_start and last_stop and last_stop < last_start:
        return [(created, last_stop), (last_start, now)]  # the stopped period we can see
    return [(created, now)]


def _overlap_hours(periods: Iterable[tuple[datetime, datetime]], since: datetime,
                   now: datetime) -> float:
    seconds = sum(max((min(end, now) - max(start, since)).total_seconds(), 0.0)
                  for start, end in periods)
    return seconds / 3600


def hours_run(state: str, created: datetime, last_start: datetime | None,
              last_stop: datetime | None, now: datetime, since: datetime | None = None) -> float:
    """Hours the node ran up to `now`, from `since` (default: its creation)."""
    periods = run_periods(state, created, last_start, last_stop, now)
    return _overlap_hours(periods, since or created, now)


@dataclass(frozen=True)
class Rate:
    """USD per hour of one node of a type at one market: running, and stopped (its disks)."""

    running: float
    stopped: float

    @property
    def compute(self) -> float:
        return self.running - self.stopped

    def spent(self, hours_ran: float, hours_existed: float) -> float:
        """USD for a node that ran `hours_ran` and whose disks existed `hours_existed`."""
        return self.compute * hours_ran + self.stopped * hours_existed


@dataclass(frozen=True)
class NodeUsage:
    """A node of the cluster as the Compute (or TPU) API lists it, with what pricing needs."""

    name: str
    node_type: str  # its `ray-user-node-type` label ("" when it has none)
    market: Market
    state: str
    created: datetime
    last_start: datetime | None = None
    last_stop: datetime | None = None
    ends: datetime | None = None  # when GCE ends it (a time limit), None: no limit

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    @classmethod
    def of_instance(cls, item: Mapping[str, Any], node_type_label: str,
                    now: datetime) -> NodeUsage:
        """From a Compute API instance (its REST JSON)."""
        return cls(item["name"], (item.get("labels") or {}).get(node_type_label, ""),
                   market_of(item.get("scheduling")), item.get("status", ""),
                   parse_time(item.get("creationTimestamp")) or now,
                   parse_time(item.get("lastStartTimestamp")),
                   parse_time(item.get("lastStopTimestamp")), end_of(item))

    @classmethod
    def of_tpu_node(cls, item: Mapping[str, Any], node_type_label: str,
                    now: datetime) -> NodeUsage:
        """From a TPU API node (its REST JSON): spot or preemptible in `schedulingConfig`."""
        return cls(item["name"].rsplit("/", 1)[-1],
                   (item.get("labels") or {}).get(node_type_label, ""),
                   tpu_market(item.get("schedulingConfig")), item.get("state", ""),
                   parse_time(item.get("createTime")) or now)


@dataclass(frozen=True)
class SpendCap:
    """The head's metadata `ray-spend-cap`: the cap (either amount may be None), its action,
    and every node type's rates by market."""

    max_usd_per_hour: float | None
    max_usd_total: float | None
    action: str  # "stop_workers" or "down"
    rates: dict[str, dict[str, Rate]] = field(default_factory=dict)
    unpriced: tuple[str, ...] = ()  # what the price table lacks (counted as free)
    node_type_label: str = ""  # the label naming a node's type (model.labels.USER_NODE_TYPE)

    @classmethod
    def from_json(cls, text: str) -> SpendCap:
        data = json.loads(text)
        return cls(data.get("max_usd_per_hour"), data.get("max_usd_total"),
                   data.get("action") or "stop_workers",
                   {name: {market: Rate(float(rate["running"]), float(rate["stopped"]))
                           for market, rate in markets.items()}
                    for name, markets in (data.get("prices") or {}).items()},
                   tuple(data.get("unpriced") or ()), data["node_type_label"])

    def rate(self, node_type: str, market: Market) -> Rate:
        """A type unknown to the table (renamed since the plan) counts as free."""
        return self.rates.get(node_type, {}).get(market, Rate(0.0, 0.0))

    def hourly(self, node: NodeUsage, now: datetime | None = None) -> float:
        """USD the node costs over the coming hour: a node with an end only for the part of
        the hour before it (`now` given)."""
        rate = self.rate(node.node_type, node.market)
        per_hour = rate.running if node.running else rate.stopped
        if node.ends is None or now is None:
            return per_hour
        return per_hour * min(1.0, max(0.0, (node.ends - now).total_seconds() / 3600))

    def accrued(self, node: NodeUsage, since: datetime | None, now: datetime) -> float:
        """USD the node cost from `since` (default: its creation) to `now` (or its end)."""
        if node.ends is not None:
            now = max(min(now, node.ends), since or node.created)
        rate = self.rate(node.node_type, node.market)
        ran = hours_run(node.state, node.created, node.last_start, node.last_stop, now, since)
        return rate.spent(ran, _overlap_hours([(node.created, now)], since or node.created, now))


def projection(cap: SpendCap, nodes: Iterable[NodeUsage], now: datetime | None = None
               ) -> float:
    """USD per hour of the cluster now: running nodes at their price, stopped ones' disks; a
    node that ends within the hour (`now` given) for the part it still has."""
    return sum(cap.hourly(node, now) for node in nodes)


def launch_refusal(cap: SpendCap, nodes: Iterable[NodeUsage], node_type: str, count: int,
                   market: Market, capped_at: str = "") -> str | None:
    """Why launching `count` nodes of the type breaks the cap (None: it does not).
    `capped_at`: when the head's daemon stopped the workers at the total cap ("" if it has
    not, or the cap was raised since)."""
    if capped_at and cap.max_usd_total is not None:
        return (f"spend cap: the cluster reached provider.spend_cap.max_usd_total "
                f"${cap.max_usd_total:.2f} and its workers were stopped at {capped_at}: no "
                f"{node_type} node is launched until the cap is raised")
    if cap.max_usd_per_hour is None:
        return None
    now = projection(cap, nodes)
    added = cap.rate(node_type, market).running * count
    if now + added <= cap.max_usd_per_hour:
        return None
    return (f"spend cap: launching {count} {node_type} node(s) ({market}, ${added:.2f}/h) would "
            f"take the cluster from ${now:.2f}/h to ${now + added:.2f}/h, over "
            f"provider.spend_cap.max_usd_per_hour ${cap.max_usd_per_hour:.2f}/h")


@dataclass
class Ledger:
    """What the head has counted so far (see the module docstring); `checked` is the time of
    the last check (None: never)."""

    path: Path
    total_usd: float = 0.0
    started: str = ""
    checked: datetime | None = None
    per_hour: float = 0.0
    nodes: int = 0
    capped: dict[str, Any] | None = None  # the last stop at the total cap: at, action, nodes

    @classmethod
    def load(cls, path: Path) -> Ledger:
        """The ledger in `path`; a new one when it is missing or unreadable."""
        try:
            data = json.loads(path.read_text())
            return cls(path, float(data["total_usd"]), str(data.get("started") or ""),
                       parse_time(data.get("checked")), float(data.get("per_hour") or 0.0),
                       int(data.get("nodes") or 0), data.get("capped"))
        except (OSError, ValueError, KeyError, TypeError):
            return cls(path)

    def count(self, cap: SpendCap, nodes: list[NodeUsage], now: datetime) -> float:
        """Add what the listed nodes cost since the last check; the new total."""
        since = self.checked
        if since is not None and since > now:  # the clock went back: count nothing twice
            since = now
        self.total_usd += sum(cap.accrued(node, since, now) for node in nodes)
        self.started = self.started or _iso(now)
        self.checked, self.per_hour, self.nodes = now, projection(cap, nodes, now), len(nodes)
        return self.total_usd

    def as_dict(self) -> dict[str, Any]:
        return {"total_usd": round(self.total_usd, 6), "started": self.started,
                "checked": _iso(self.checked) if self.checked else None,
                "per_hour": round(self.per_hour, 6), "nodes": self.nodes,
                "capped": self.capped}

    def save(self) -> None:
        """Written whole, then renamed over the old file: a crash leaves one or the other."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".tmp")
        partial.write_text(json.dumps(self.as_dict(), sort_keys=True) + "\n")
        os.replace(partial, self.path)


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
