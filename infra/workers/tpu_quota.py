"""TPU quota pre-flight: what TPU slices take from the project's Cloud TPU quotas.

Cloud TPU quotas are the TPU service's own (tpu.googleapis.com), not Compute's `regions.get`
ones, and the TPU API has no quota method: the limits come from Service Usage
`consumerQuotaMetrics.list` (service_usage.py), the usage from the TPU nodes that exist in the
zone (TPU API `nodes.list`).

Each TPU generation has a quota per provisioning model (on-demand, preemptible/spot, reserved).
v2, v3, v4 and v5p quotas count TensorCores, v5e and v6e chips, so the number in an
accelerator type (`v4-16`: 16 TensorCores, `v6e-8`: 8 chips) is what a slice takes. v2 and v3
have separate quotas for single devices (`v2-8`) and pod slices (`v2-32`). Google names the
metrics `tpu.googleapis.com/tpu-v6e-preemptible`, `tpu-v5s-litepod-preemptible`,
`tpu-v5p-preemptible`, ... with variants by generation (`tpu-v4-` and `tpu-v4s-` are both
seen), so the check takes the one metric of the listing whose name fits the generation and
model; none or several is an honest "unknown", as is a listing that cannot be read. A metric
has a zone limit (unit `1/{project}/{zone}`) and may have a region one: the tighter one
counts. In use counts the other TPU nodes of the cluster's zone (a lower bound for a region
limit); the cluster's own slices are in what it needs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from infra.workers.quota import QuotaRow
from model.labels import CLUSTER_NAME

TPU_SERVICE = "tpu.googleapis.com"
Model = Literal["on-demand", "preemptible", "reserved"]

# accelerator type prefix -> (generation, quota unit, metric name stem as a regex)
_GENERATIONS: dict[str, tuple[str, str, str]] = {
    "v2": ("v2", "TensorCores", r"v2s?"),
    "v3": ("v3", "TensorCores", r"v3s?"),
    "v4": ("v4", "TensorCores", r"v4s?"),
    "v5p": ("v5p", "TensorCores", r"v5ps?"),
    "v5litepod": ("v5e", "chips", r"v5s?-?lite-?pod"),
    "v5e": ("v5e", "chips", r"v5s?-?lite-?pod"),
    "v6e": ("v6e", "chips", r"v6es?"),
}
_CORES_PER_CHIP = {"v2": 2, "v3": 2, "v4": 2, "v5p": 2}
_SINGLE_DEVICE_CORES = 8  # v2-8 / v3-8: the largest single-device types


@dataclass(frozen=True)
class TpuQuotaKey:
    """Which quota a slice draws on."""

    generation: str
    model: Model
    pod: bool

    @property
    def unit(self) -> str:
        return next(unit for gen, unit, _ in _GENERATIONS.values() if gen == self.generation)

    def describe(self) -> str:
        """The quota in words, for a metric the listing does not name."""
        pod = " pod" if self.pod else ""
        return f"TPU {self.generation}{pod} {self.model} {self.unit}"

    def matches(self, metric: str) -> bool:
        stem = next(s for gen, _, s in _GENERATIONS.values() if gen == self.generation)
        # v2/v3 pod slices have quotas of their own; later generations are all slices.
        pod = ("-pod" if self.pod else "") if self.generation in ("v2", "v3") else "(?:-pod)?"
        model = {"on-demand": "", "preemptible": "-preemptible", "reserved": "-reserved"}
        pattern = rf"{re.escape(TPU_SERVICE)}/tpu-{stem}{pod}{model[self.model]}"
        return re.fullmatch(pattern, metric) is not None


def model_of(scheduling: Mapping[str, Any] | None) -> Model:
    """A TPU body's `schedulingConfig`: spot and preemptible draw on the preemptible quota."""
    scheduling = scheduling or {}
    if scheduling.get("reserved"):
        return "reserved"
    return "preemptible" if scheduling.get("preemptible") or scheduling.get("spot") else "on-demand"


def slice_need(
    accelerator_type: str | None,
    model: Model,
    config_type: str | None = None,
    topology: str | None = None,
) -> tuple[TpuQuotaKey, int] | None:
    """(quota, units) one slice takes: from `v4-16`, or from `{type: V4, topology: 2x2x2}`.
    None for a generation this check does not know."""
    if accelerator_type:
        version, _, size = accelerator_type.lower().partition("-")
        units = int(size) if size.isascii() and size.isdigit() else 0
    else:
        version = (config_type or "").lower().replace("_", "")
        chips = 1
        for part in (topology or "").lower().split("x"):
            chips *= int(part) if part.isascii() and part.isdigit() else 1
        units = chips * _CORES_PER_CHIP.get(version, 1)
    known = _GENERATIONS.get(version)
    if known is None or units <= 0:
        return None
    generation = known[0]
    pod = generation in ("v2", "v3") and units > _SINGLE_DEVICE_CORES
    return TpuQuotaKey(generation, model, pod), units


def find_metric(metrics: Iterable[Mapping[str, Any]], key: TpuQuotaKey) -> Mapping[str, Any] | str:
    """The one listed metric for `key`, or why there is none."""
    found = [m for m in metrics if key.matches(str(m.get("metric", "")))]
    if len(found) == 1:
        return found[0]
    if not found:
        return "the project lists no such TPU quota"
    names = ", ".join(sorted(str(m["metric"]) for m in found))
    return f"several quotas fit: {names}"


def location_limit(metric: Mapping[str, Any], zone: str) -> tuple[float, str] | None:
    """(limit, "zone Z" / "region R") of the tightest finite zone or region limit that
    applies to `zone`; None when every one is unlimited. A bucket for the location wins over
    the limit's default bucket; an omitted effectiveLimit is 0 (proto3 leaves zeros out)."""
    region = zone.rsplit("-", 1)[0]
    best: tuple[float, str] | None = None
    for limit in metric.get("consumerQuotaLimits") or []:
        unit = str(limit.get("unit", ""))
        if "{zone}" in unit:
            dimension, location = "zone", zone
        elif "{region}" in unit:
            dimension, location = "region", region
        else:
            continue
        buckets = limit.get("quotaBuckets") or []
        chosen = next(
            (b for b in buckets if (b.get("dimensions") or {}).get(dimension) == location),
            next((b for b in buckets if not b.get("dimensions")), None),
        )
        if chosen is None:
            continue
        value = float(chosen.get("effectiveLimit") or 0)
        if value >= 0 and (best is None or value < best[0]):
            best = (value, f"{dimension} {location}")
    return best


def zone_usage(nodes: Iterable[Mapping[str, Any]], cluster_name: str = "") -> Counter:
    """TpuQuotaKey -> units the zone's TPU nodes hold (each node as the API lists it:
    acceleratorType or acceleratorConfig, schedulingConfig), but for the cluster's own: those
    are part of what the cluster at its largest needs, so counting them again would be twice."""
    usage: Counter = Counter()
    for node in nodes:
        if cluster_name and (node.get("labels") or {}).get(CLUSTER_NAME) == cluster_name:
            continue
        config = node.get("acceleratorConfig") or {}
        need = slice_need(
            node.get("acceleratorType"),
            model_of(node.get("schedulingConfig")),
            config.get("type"),
            config.get("topology"),
        )
        if need is not None:
            usage[need[0]] += need[1]
    return usage


def tpu_quota_rows(
    needs: Mapping[TpuQuotaKey, int],
    zone: str,
    metrics: list[Mapping[str, Any]] | str,
    usage: Mapping[TpuQuotaKey, int] | str,
) -> dict[TpuQuotaKey, QuotaRow]:
    """One row per quota the slices need. `metrics` / `usage` as read, or why they could not
    be (then the rows say "unknown" and why, and never count as short)."""
    rows = {}
    for key, needed in needs.items():
        found = find_metric(metrics, key) if not isinstance(metrics, str) else metrics
        if isinstance(found, str):
            rows[key] = QuotaRow(key.describe(), float(needed), None, note="unknown", why=found)
            continue
        name = str(found["metric"]).removeprefix(f"{TPU_SERVICE}/")
        limit = location_limit(found, zone)
        if limit is None:
            rows[key] = QuotaRow(f"{name} ({key.unit})", float(needed), None,
                                 note="unlimited")
            continue
        label = f"{name} ({key.unit}, {limit[1]})"
        if isinstance(usage, str):
            rows[key] = QuotaRow(label, float(needed), None, note="unknown", why=usage)
            continue
        rows[key] = QuotaRow(label, float(needed), limit[0], float(usage.get(key, 0)))
    return rows
