"""The head's spend-cap entry, `ray-spend-cap`: `provider.spend_cap` and every node type's
hourly price by market (running, and stopped: its disks), from the price table at plan time,
so the head needs neither the table nor our packages (head_provider/spend.py's SpendCap reads
it).

Its own key, like `ray-autostop`: changing the cap, or a price, is an in-place metadata update
the head's daemon and node provider read at their next check; nothing is replaced or restarted.
"""

from __future__ import annotations

import json

from bootstrap.head_provider.capacity import ON_DEMAND, SPOT
from bootstrap.head_provider.spend import SPEND_CAP_KEY
from model.config import ClusterConfig, TpuNodeConfig
from model.labels import USER_NODE_TYPE
from model.prices import NodePrice, node_type_price


def _rate(price: NodePrice) -> dict[str, float]:
    return {"running": round(price.running, 6), "stopped": round(price.stopped, 6)}


def spend_cap_settings(config: ClusterConfig) -> dict | None:
    """The cap and the prices; None without `provider.spend_cap`. A compute type is priced at
    both markets (a spot type's workers may be on-demand in fallback); a TPU type at its own."""
    cap = config.provider.spend_cap
    if cap is None:
        return None
    region = config.provider.region
    prices: dict[str, dict[str, dict[str, float]]] = {}
    unpriced: set[str] = set()
    for name, node_type in config.available_node_types.items():
        if isinstance(node_type.node_config, TpuNodeConfig):
            own = node_type_price(node_type, region)
            by_market = {SPOT: own, ON_DEMAND: own}
        else:
            by_market = {market: node_type_price(node_type, region, spot=market == SPOT)
                         for market in (SPOT, ON_DEMAND)}
        prices[name] = {market: _rate(price) for market, price in by_market.items()}
        unpriced.update(item for price in by_market.values() for item in price.unpriced)
    return {"max_usd_per_hour": cap.max_usd_per_hour, "max_usd_total": cap.max_usd_total,
            "action": cap.action, "prices": prices, "unpriced": sorted(unpriced),
            "node_type_label": USER_NODE_TYPE}


def spend_cap_entries(config: ClusterConfig) -> dict[str, str]:
    settings = spend_cap_settings(config)
    return {SPEND_CAP_KEY: json.dumps(settings, sort_keys=True)} if settings else {}
