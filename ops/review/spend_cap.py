"""The cluster's price per hour against its `provider.spend_cap`: the projection `invoke plan`
and `invoke diff` show beside the price lines, and the finding that refuses a plan whose pinned
nodes alone cost more an hour than `max_usd_per_hour`.

The projection is an estimate from the dated price table (`prices.cluster_price`): the pinned
size is the head, the workers Pulumi keeps and the TPU slices, each at its market; max_workers
is the dearest mix Ray's autoscaler may reach. With `max_usd_total`, it says how long the total
lasts at each before the head takes the cap's action. The head enforces the cap on the running
cluster (bootstrap/); this is the review before anything exists. A part the table cannot price
makes every figure a floor: a floor over the cap refuses, a floor within it is not a promise.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from model.config import ClusterConfig
from model.stack_config import CONFIG_KEY, INLINE_KEY
from ops.review.prices import cluster_price, node_type_price, price_table

SPEND_CAP = "spend-cap"
"""The guardrail's name in a plan's `policy` list: always mandatory (the YAML's own cap)."""
HOURLY_PATH = "provider.spend_cap.max_usd_per_hour"
ACTIONS = {"stop_workers": "the head stops every worker",
           "down": "the head stops the whole cluster"}
WITHIN, OVER_AT_MAX, OVER_PINNED = "within", "max_workers_over", "pinned_over"

Projection = dict[str, Any]


def config_source(settings: dict[str, str], stack: str, root: Path) -> str:
    """Where the cluster config a stack deploys is written, as a user names it: its cluster
    YAML (relative to the project when inside it), else the stack file holding it inline."""
    path = settings.get(CONFIG_KEY)
    if not path:
        return f"stacks/Pulumi.{stack}.yaml ({INLINE_KEY})"
    resolved = Path(path).expanduser()
    resolved = resolved if resolved.is_absolute() else root / resolved
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(resolved)


def cap_projection(config: ClusterConfig, counts: dict[str, int]) -> Projection | None:
    """The cap, the cluster's price per hour at the pinned size and at max_workers, the verdict
    on the hourly cap and the hours the total cap lasts; None without a cap."""
    cap = config.provider.spend_cap
    if cap is None:
        return None
    price = cluster_price(config, counts)
    region, types = config.provider.region, config.available_node_types
    pinned_types = {name: count for name, count in sorted(counts.items()) if count}
    per_node = {name: node_type_price(types[name], region).running for name in pinned_types}
    workers = [{"node_type": name, "count": count, "min_workers": types[name].min_workers,
                "per_node": round(per_node[name], 6)} for name, count in pinned_types.items()]
    # A spot type with an on-demand fallback (provider.capacity) is priced as spot; its
    # pinned workers cost this much more an hour once spot runs out in every zone.
    fallback = {name: count * (node_type_price(types[name], region, spot=False).running
                               - per_node[name])
                for name, count in pinned_types.items()
                if config.provider.capacity_input(name) is not None}
    hourly = cap.max_usd_per_hour
    pinned, at_max = round(price.pinned, 4), round(price.at_max_workers, 4)  # as shown
    verdict = None if hourly is None else (
        OVER_PINNED if pinned > hourly else OVER_AT_MAX if at_max > hourly else WITHIN)
    total = cap.max_usd_total
    return {
        "max_usd_per_hour": hourly,
        "max_usd_total": total,
        "action": cap.action,
        "pinned": pinned,
        "at_max_workers": at_max,
        "verdict": verdict,
        "fallback_types": sorted(fallback),
        "pinned_on_demand_fallback": (round(price.pinned + sum(fallback.values()), 4)
                                      if fallback else None),
        "hours_at_pinned": _hours(total, price.pinned),
        "hours_at_max_workers": _hours(total, price.at_max_workers),
        "head_per_hour": round(node_type_price(config.head_type, region).running, 6),
        "pinned_workers": workers,
        "unpriced": list(price.unpriced),
        "prices_as_of": price_table()["as_of"],
    }


def _hours(total: float | None, per_hour: float) -> float | None:
    """Hours `total` dollars last at `per_hour` (None: no total cap, or nothing priced)."""
    if total is None or per_hour <= 0:
        return None
    return round(total / per_hour, 2)


def _usd(amount: float, beside: float | None = None) -> str:
    """Dollars and cents; to the fourth decimal when cents would show `amount` equal to the
    different amount `beside` (a price a hair over its cap)."""
    close = beside is not None and amount != beside and f"{amount:.2f}" == f"{beside:.2f}"
    return f"${amount:,.4f}" if close else f"${amount:,.2f}"


def _cents_up(amount: float) -> str:
    return f"${math.ceil(round(amount * 100, 6)) / 100:,.2f}"


def duration(hours: float) -> str:
    if hours < 1:
        return f"{hours * 60:.0f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours:,.0f} h (about {hours / 24:,.0f} days)"


def cap_lines(projection: Projection) -> dict[str, str]:
    """`hourly`, `fallback` (pinned spot workers falling back to on-demand would pass the
    hourly cap) and `total`: the sentences the plan and the diff show, each when it
    applies."""
    floor = "at least " if projection["unpriced"] else ""
    hourly = projection["max_usd_per_hour"]
    pinned = f"{floor}{_usd(projection['pinned'], hourly)}/h"
    at_max = f"{floor}{_usd(projection['at_max_workers'], hourly)}/h"
    lines = {}
    if hourly is not None:
        cap = f"{_usd(hourly)}/h"
        if projection["verdict"] == OVER_PINNED:
            lines["hourly"] = (f"the pinned nodes alone cost {pinned}, over the {cap} cap: "
                               "the plan is refused")
        elif projection["verdict"] == OVER_AT_MAX:
            lines["hourly"] = (f"{pinned} at the pinned size is within the {cap} cap; "
                               f"max_workers could reach {at_max}, over it: the head will "
                               "refuse launches past it")
        else:
            lines["hourly"] = (f"within the {cap} cap: {pinned} at the pinned size, up to "
                               f"{at_max} at max_workers")
            if projection["unpriced"]:
                lines["hourly"] += (f" (as far as the table prices it: without "
                                    f"{', '.join(projection['unpriced'])})")
    on_demand = projection.get("pinned_on_demand_fallback")
    if hourly is not None and on_demand is not None and on_demand > hourly \
            and projection["verdict"] != OVER_PINNED:
        lines["fallback"] = (f"if spot runs out and the pinned "
                             f"{', '.join(projection['fallback_types'])} fall back to "
                             f"on-demand, the pinned size reaches {floor}"
                             f"{_usd(on_demand, hourly)}/h, over the {_usd(hourly)}/h cap")
    if projection["max_usd_total"] is not None:
        lasts = "at most about" if projection["unpriced"] else "about"
        spans = [f"{duration(hours)} at {where}" for hours, where in (
            (projection["hours_at_pinned"], "the pinned size"),
            (projection["hours_at_max_workers"], "max_workers")) if hours is not None]
        action = projection["action"]
        lines["total"] = (
            f"{_usd(projection['max_usd_total'])} in total lasts {lasts} "
            f"{' and '.join(spans) if spans else 'an unknown time (nothing priced)'}, then "
            f"{ACTIONS[action]} (action {action})")
    return lines


def estimate_label(projection: Projection) -> str:
    return f"estimates from the price table as of {projection['prices_as_of']}"


def cap_settings(projection: Projection | None) -> str:
    """`max_usd_per_hour $1.00/h, max_usd_total $300.00, action down`, or `none`."""
    if projection is None:
        return "none"
    parts = []
    if projection["max_usd_per_hour"] is not None:
        parts.append(f"max_usd_per_hour {_usd(projection['max_usd_per_hour'])}/h")
    if projection["max_usd_total"] is not None:
        parts.append(f"max_usd_total {_usd(projection['max_usd_total'])}")
    return ", ".join([*parts, f"action {projection['action']}"])


def table_lines(projection: Projection | None) -> list[str]:
    """`invoke plan --format table`'s lines under the price line (none without a cap)."""
    if projection is None:
        return []
    return [f"spend cap: {cap_settings(projection)} ({estimate_label(projection)})",
            *(f"  {line}" for line in cap_lines(projection).values())]


def markdown_lines(base: Projection | None, head: Projection | None) -> list[str]:
    """The diff's spend-cap lines: the cap (`old → new` when it changed), then the working
    tree's projection, each sentence with the base's beside it when that differs."""
    if base is None and head is None:
        return []
    before, after = cap_settings(base), cap_settings(head)
    settings = f"{before} → {after}" if before != after else after
    lines = [f"**Spend cap:** {settings} ({estimate_label(head or base)})"]
    old = cap_lines(base) if base else {}
    new = cap_lines(head) if head else {}
    for kind in ("hourly", "fallback", "total"):
        if kind in new:
            was = f" (before: {old[kind]})" if old.get(kind, new[kind]) != new[kind] else ""
            lines.append(f"- {new[kind]}{was}")
        elif kind in old:
            lines.append(f"- (before: {old[kind]})")
    return [*lines, ""]


def cap_findings(projection: Projection | None, source: str) -> list[dict[str, str]]:
    """The mandatory `spend-cap` finding of a plan whose pinned nodes alone exceed the hourly
    cap; its resource is the file that sets the cap and its message the YAML path, the
    projection, the cap and the fix."""
    if projection is None or projection["verdict"] != OVER_PINNED:
        return []
    floor = "at least " if projection["unpriced"] else ""
    cap = projection["max_usd_per_hour"]
    message = (f"{HOURLY_PATH}: the pinned nodes alone cost {floor}"
               f"{_usd(projection['pinned'], cap)}/h (estimated from the price table as of "
               f"{projection['prices_as_of']}), over the {_usd(cap)}/h cap: "
               f"{_fix(projection)}")
    return [{"policy": SPEND_CAP, "level": "mandatory", "resource": source,
             "message": message}]


def _fix(projection: Projection) -> str:
    """Fewer pinned workers, dearest first, until the pinned size fits; or a higher cap."""
    cap, excess = projection["max_usd_per_hour"], projection["pinned"] - \
        projection["max_usd_per_hour"]
    raise_cap = f"raise max_usd_per_hour to at least {_cents_up(projection['pinned'])}"
    if projection["head_per_hour"] > cap:
        return (f"the head alone costs {_usd(projection['head_per_hour'])}/h: choose a "
                f"smaller head machine or {raise_cap}")
    lowered = []
    for worker in sorted(projection["pinned_workers"], key=lambda w: -w["per_node"]):
        if excess <= 0:
            break
        if worker["per_node"] <= 0:
            continue
        fewer = min(worker["count"], math.ceil(round(excess / worker["per_node"], 9)))
        excess -= fewer * worker["per_node"]
        where = (f"min_workers of {worker['node_type']}"
                 if worker["count"] == worker["min_workers"]
                 else f"ray-gcp:workerCounts.{worker['node_type']} in the stack file")
        lowered.append(f"{where} from {worker['count']} to {worker['count'] - fewer}")
    return f"lower {' and '.join(lowered)}, or {raise_cap}" if lowered else raise_cap
