"""Offline checks of the names a cluster YAML gives Google Cloud, against the dated catalog
`catalog.yaml` beside this module: region and zones, machine types (predefined, named,
bundled with GPUs, custom shapes), GPUs and how many a series takes, TPU generations, their
slice sizes and zones.

A name in the catalog passes. A name missing from it but shaped like a real one (a new size
of a known shape, a series or GPU the catalog does not know yet) is a warning naming the
catalog's date; a malformed or misspelled one is an error naming the nearest names. Whether
the zone offers a type today is `invoke preflight`'s question (ops/lifecycle/preflight.py).
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model.yaml_text import load_shipped_yaml

CATALOG_FILE = Path(__file__).with_name("catalog.yaml")

_REGION_FORM = re.compile(r"[a-z]+-[a-z]+[1-9][0-9]*", re.ASCII)
_ZONE_FORM = re.compile(r"(?P<region>[a-z]+-[a-z]+[1-9][0-9]*)-[a-z][a-z0-9]*", re.ASCII)
_SERIES_FORM = re.compile(r"[a-z][0-9]+[a-z]?", re.ASCII)
_MACHINE_FORM = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)+", re.ASCII)
_STEM = re.compile(r"(?P<stem>[a-z][a-z0-9]*-[a-z]+)-[0-9]+", re.ASCII)
_CUSTOM = re.compile(
    r"(?:(?P<series>[a-z][a-z0-9]*)-)?custom-(?P<vcpus>[0-9]+)-(?P<mb>[0-9]+)(?P<ext>-ext)?",
    re.ASCII,
)
_GPU_FORM = re.compile(r"nvidia-[a-z0-9]+(-[a-z0-9]+)*", re.ASCII)
_TPU_GENERATION_FORM = re.compile(r"(v[0-9]+[a-z]*|tpu[0-9]+[a-z]*)", re.ASCII)
_MB_STEP = 256


@functools.cache
def catalog() -> dict[str, Any]:
    return load_shipped_yaml(CATALOG_FILE)


def as_of() -> str:
    return str(catalog()["as_of"])


@dataclass
class Findings:
    """Problems (errors) and warnings, each a (path below the checked piece, message)."""

    errors: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)

    def unlisted(self, path: str, what: str, fix: str) -> None:
        self.warnings.append((path, f"{what} is not in the catalog of {as_of()}: {fix}"))

    def extend(self, other: Findings, prefix: str) -> None:
        self.errors += [(_join(prefix, path), message) for path, message in other.errors]
        self.warnings += [(_join(prefix, path), message) for path, message in other.warnings]


def _join(prefix: str, path: str) -> str:
    return f"{prefix}.{path}" if prefix and path else prefix or path


def nearest(name: str, choices: list[str], count: int = 3, cutoff: float = 0.6) -> list[str]:
    return difflib.get_close_matches(name, choices, n=count, cutoff=cutoff)


def _did_you_mean(name: str, choices: list[str]) -> str:
    close = nearest(name, choices)
    return f"did you mean {' or '.join(close)}?" if close else ""


# ---------------------------------------------------------------- regions and zones


def zones_of(region: str) -> list[str]:
    return [f"{region}-{letter}" for letter in catalog()["regions"].get(region, [])]


def region_problem(region: str) -> str | None:
    """Why `region` cannot be a region (an error), or None when it is or looks like one."""
    if region in catalog()["regions"] or _REGION_FORM.fullmatch(region):
        return None
    hint = _did_you_mean(region, list(catalog()["regions"]))
    return (f"{region!r} is not a GCE region (they look like us-central1): "
            f"{hint or 'see `gcloud compute regions list`'}").rstrip()


def zone_problem(zone: str, region: str) -> str | None:
    """Why `zone` cannot be a zone of `region` (an error), or None."""
    if zone in zones_of(region):
        return None
    match = _ZONE_FORM.fullmatch(zone)
    if match and match["region"] == region:
        return None
    known = zones_of(region) or [z for r in catalog()["regions"] for z in zones_of(r)]
    close = nearest(zone, known) or known[:3]
    if match:
        pick = f"one of {', '.join(zones_of(region))}" if zones_of(region) else f"{region}-a"
        return f"zone {zone!r} is not in region {region!r}: pick {pick}"
    return (f"{zone!r} is not a GCE zone (they look like us-central1-a): "
            f"did you mean {' or '.join(close)}?")


def location_warnings(region: str, zones: dict[str, str]) -> Findings:
    """Region and zones (path -> zone) shaped right but not in the catalog."""
    found = Findings()
    if region not in catalog()["regions"]:
        found.unlisted("provider.region", f"region {region}", "check it with `gcloud compute "
                       "regions list`, or refresh the catalog (`invoke catalog-refresh`)")
        return found
    for path, zone in zones.items():
        if zone not in zones_of(region):
            found.unlisted(path, f"zone {zone}",
                           f"{region}'s zones are {', '.join(zones_of(region))}")
    return found


# ---------------------------------------------------------------- machine types and GPUs


@functools.cache
def _series_names() -> dict[str, list[str]]:
    """Series -> every machine type name the catalog lists for it."""
    names: dict[str, list[str]] = {}
    for series, facts in catalog()["machine_series"].items():
        listed = [f"{series}-{shape}-{vcpus}"
                  for shape, counts in (facts.get("shapes") or {}).items() for vcpus in counts]
        listed += list(facts.get("named") or []) + list(facts.get("bundled") or {})
        names[series] = listed
    return names


@functools.cache
def machine_names() -> list[str]:
    return [name for names in _series_names().values() for name in names]


@functools.cache
def _known_names() -> frozenset[str]:
    return frozenset(machine_names())


def series_of(machine_type: str) -> str:
    """`n2` of `n2-standard-8`, `n1` of `custom-4-8192` and of `f1-micro`."""
    if machine_type.startswith("custom-"):
        return "n1"
    for series, names in _series_names().items():
        if machine_type in names:
            return series
    return machine_type.split("-", 1)[0]


def bundled_gpus(machine_type: str) -> tuple[str, int] | None:
    """The GPU type and count a machine type comes with (a2, a3, a4, g2), or None."""
    facts = catalog()["machine_series"].get(series_of(machine_type)) or {}
    bundled = (facts.get("bundled") or {}).get(machine_type)
    return (str(bundled[0]), int(bundled[1])) if bundled else None


def check_machine_type(name: str) -> Findings:
    found = Findings()
    if name in _known_names():
        return found
    custom = _CUSTOM.fullmatch(name)
    if custom:
        return _check_custom(name, custom)
    series = name.split("-", 1)[0]
    facts = catalog()["machine_series"].get(series)
    names = _series_names().get(series, [])
    stem = _STEM.match(name)
    if facts is not None and stem and any(n.startswith(f"{stem['stem']}-") for n in names):
        found.unlisted("", name, f"the catalog's {stem['stem']} types are "
                       f"{_listing([n for n in names if n.startswith(stem['stem'] + '-')])}")
    elif facts is None and _SERIES_FORM.fullmatch(series) and _MACHINE_FORM.fullmatch(name):
        close = nearest(name, machine_names())
        found.unlisted("", f"machine series {series}", "check the name with `gcloud compute "
                       "machine-types list`" + (f" (nearest: {', '.join(close)})" if close else ""))
    else:
        close = nearest(name, names or machine_names())
        fix = f"did you mean {' or '.join(close)}?" if close else (
            "write a type such as n2-standard-8 or n2-custom-4-8192 "
            "(`gcloud compute machine-types list`)")
        found.errors.append(("", f"{name!r} is not a GCE machine type: {fix}"))
    return found


def _listing(names: list[str], most: int = 8) -> str:
    shown = ", ".join(names[:most])
    return shown + (", ..." if len(names) > most else "")


def _check_custom(name: str, match: re.Match[str]) -> Findings:
    found = Findings()
    series = match["series"] or "n1"
    facts = catalog()["machine_series"].get(series)
    takes = [s for s, f in catalog()["machine_series"].items() if f.get("custom")]
    if facts is None:
        if _SERIES_FORM.fullmatch(series):
            found.unlisted("", f"machine series {series}", "custom shapes are known for "
                           f"{', '.join(takes)}")
        else:
            found.errors.append(("", f"{name!r}: {series!r} is not a machine series: write "
                                     "<series>-custom-<vCPUs>-<MB> with one of "
                                     f"{', '.join(takes)}"))
        return found
    rules = facts.get("custom")
    if not rules:
        found.errors.append(("", f"{name!r}: the {series} series has no custom shapes: use a "
                                 f"predefined {series} type, or a custom shape of "
                                 f"{', '.join(takes)}"))
        return found
    vcpus, mb = int(match["vcpus"]), int(match["mb"])
    steps = [range(start, stop + 1, step) for start, stop, step in rules["vcpus"]]
    if not any(vcpus in allowed for allowed in steps):
        found.errors.append(("", f"{name!r}: a custom {series} shape takes "
                                 f"{_vcpu_rule(rules['vcpus'])} vCPUs, not {vcpus}: change it"))
    if mb % _MB_STEP:
        found.errors.append(("", f"{name!r}: custom memory is a multiple of 256 MB: use "
                                 f"{mb // _MB_STEP * _MB_STEP or _MB_STEP}"))
    low, high = rules["gib_per_vcpu"]
    per_vcpu = mb / 1024 / max(vcpus, 1)
    if per_vcpu < low:
        found.errors.append(("", f"{name!r}: a custom {series} shape has at least {low} GiB a "
                                 f"vCPU ({int(low * 1024 * vcpus)} MB for {vcpus}): raise it"))
    elif per_vcpu > high and not match["ext"]:
        fix = ("add -ext for extended memory, or lower it" if rules.get("extended")
               else "lower it")
        found.errors.append(("", f"{name!r}: a custom {series} shape has at most {high} GiB a "
                                 f"vCPU ({int(high * 1024 * vcpus)} MB for {vcpus}): {fix}"))
    elif match["ext"] and not rules.get("extended"):
        found.errors.append(("", f"{name!r}: the {series} series has no extended memory: "
                                 "remove -ext"))
    return found


def _vcpu_rule(steps: list[list[int]]) -> str:
    parts = [str(start) if start == stop else
             f"{start}-{stop}" + (f" in steps of {step}" if step > 1 else "")
             for start, stop, step in steps]
    return ", ".join(parts)


def check_gpus(machine_type: str, accelerators: list[tuple[str, int]],
               on_host_maintenance: str | None) -> Findings:
    """The guestAccelerators (bare GPU name, count) of a node on `machine_type`; a machine
    type that comes with GPUs cannot live-migrate either."""
    found = Findings()
    gpus = catalog()["gpus"]
    series = series_of(machine_type)
    bundled = bundled_gpus(machine_type)
    if bundled is not None and on_host_maintenance != "TERMINATE":
        found.errors.append(("scheduling", f"{machine_type} comes with GPUs, which cannot "
                                           "live-migrate: set scheduling.onHostMaintenance: "
                                           "TERMINATE"))
    for index, (gpu, count) in enumerate(accelerators):
        path = f"guestAccelerators[{index}]"
        if gpu not in gpus:
            close = nearest(gpu, list(gpus), cutoff=0.85)
            if close or not _GPU_FORM.fullmatch(gpu):
                hint = f"did you mean {' or '.join(close)}?" if close else (
                    f"GPU types look like nvidia-tesla-t4: one of {_listing(list(gpus))}")
                found.errors.append((f"{path}.acceleratorType",
                                     f"{gpu!r} is not a GCE GPU type: {hint}"))
            else:
                found.unlisted(f"{path}.acceleratorType", f"GPU {gpu}",
                               "check it with `gcloud compute accelerator-types list`")
            continue
        if bundled is not None:
            if (gpu, count) != bundled:
                found.errors.append((path, f"{machine_type} comes with {bundled[1]} x "
                                           f"{bundled[0]}: remove guestAccelerators (or make "
                                           "it match)"))
            continue
        if series not in catalog()["machine_series"]:
            continue  # a series the catalog does not know: warned about already
        counts = (gpus[gpu].get("counts") or {}).get(series)
        if counts is None:
            takers = sorted({s for g in gpus.values() for s in (g.get("counts") or {})})
            comes = [m for m in machine_names() if (bundled_gpus(m) or ("",))[0] == gpu]
            fix = (f"use a machine type that comes with it ({_listing(comes, 4)}) and remove "
                   "guestAccelerators") if comes else (
                f"attach it to a {'/'.join(takers)} machine type")
            found.errors.append((path, f"{machine_type} takes no {gpu} through "
                                       f"guestAccelerators: {fix}"))
        elif count not in counts:
            found.errors.append((f"{path}.acceleratorCount",
                                 f"{gpu} on {series} comes {_or(counts)} to a VM, not {count}: "
                                 "change acceleratorCount"))
    if bundled is not None and len(accelerators) > 1:
        found.errors.append(("guestAccelerators", f"{machine_type} comes with one GPU type: "
                                                  "remove guestAccelerators"))
    return found


def _or(counts: list[int]) -> str:
    words = [str(c) for c in counts]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


# ---------------------------------------------------------------- TPUs


def _tpus() -> dict[str, Any]:
    return catalog()["tpus"]


def generation_of_config_type(config_type: str) -> str | None:
    """`v5litepod` for acceleratorConfig type V5LITE_POD; None for a type not listed."""
    wanted = config_type.upper()
    return next((gen for gen, facts in _tpus().items() if facts["config_type"] == wanted), None)


def check_tpu_type(accelerator_type: str, zone: str) -> Findings:
    """`acceleratorType` such as v4-8 in the node's zone."""
    found = Findings()
    generation, _, size_text = accelerator_type.partition("-")
    facts = _tpus().get(generation)
    if facts is None:
        alias = next((g for g, f in _tpus().items() if generation in (f.get("also_called") or [])),
                     None)
        close = [alias] if alias else nearest(generation, list(_tpus()))
        if close:
            suggested = [f"{g}-{size_text}" for g in close]
            found.errors.append(("acceleratorType", f"{accelerator_type!r} is not a TPU type: "
                                                    f"did you mean {' or '.join(suggested)}?"))
        elif _TPU_GENERATION_FORM.fullmatch(generation):
            found.unlisted("acceleratorType", f"TPU generation {generation}",
                           f"the catalog knows {', '.join(_tpus())}")
        else:
            found.errors.append(("acceleratorType", f"{accelerator_type!r} is not a TPU type: "
                                                    f"use one of {', '.join(_tpus())}, e.g. v4-8"))
        return found
    if int(size_text) not in facts["sizes"]:
        found.unlisted("acceleratorType", accelerator_type,
                       f"{generation} slices come in {_listing([str(s) for s in facts['sizes']])}")
    found.errors += _zone_errors(generation, zone, "acceleratorType")
    return found


def check_tpu_config(config_type: str, topology: str, zone: str) -> Findings:
    """`acceleratorConfig` {type, topology} in the node's zone."""
    found = Findings()
    generation = generation_of_config_type(config_type)
    if generation is None:
        types = [f["config_type"] for f in _tpus().values()]
        close = nearest(config_type.upper(), types) or types
        found.errors.append(("acceleratorConfig.type",
                             f"{config_type!r} is not a TPU type of acceleratorConfig: use "
                             f"{' or '.join(close)}"))
        return found
    facts = _tpus()[generation]
    dimensions, parts = facts["dimensions"], topology.lower().split("x")
    if len(parts) != dimensions:
        example = "2x2x1" if dimensions == 3 else "2x2"
        found.errors.append(("acceleratorConfig.topology",
                             f"a {generation} topology has {dimensions} dimensions, "
                             f"not {topology!r}: write e.g. {example}"))
    else:
        size = facts.get("cores_per_chip", 1) * math.prod(int(part) for part in parts)
        if size not in facts["sizes"]:
            found.unlisted("acceleratorConfig.topology", f"{generation} topology {topology} "
                           f"({generation}-{size})", f"{generation} slices come in "
                           f"{_listing([str(s) for s in facts['sizes']])}")
    found.errors += _zone_errors(generation, zone, "acceleratorConfig.type")
    return found


def _zone_errors(generation: str, zone: str, path: str) -> list[tuple[str, str]]:
    zones = _tpus()[generation]["zones"]
    if zone in zones:
        return []
    here = [g for g, f in _tpus().items() if zone in f["zones"]]
    other = (f"or use a generation {zone} offers ({', '.join(here)})" if here
             else f"{zone} offers no TPU in the catalog")
    return [(path, f"TPU {generation} is offered only in {', '.join(zones)} (catalog of "
                   f"{as_of()}), not in {zone}: move provider.availability_zone there, {other}")]
