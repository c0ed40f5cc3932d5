"""Our filled-in model against Ray's own loader from the installed wheel.

Ray's `prepare_config` (defaults merged, setup commands merged, docker checked, per-type
min/max filled) then `validate_config` (its JSON schema) and the offline checks of its GCP
bootstrap are the oracle. The inputs are the GCP YAMLs the `ray` wheel ships
(`ray/autoscaler/gcp/*.yaml`: only `defaults.yaml`; the wheel carries no example YAMLs), our own
copies of Ray's GCP examples (`stacks/clusters/`, SPEC section 4), and variants generated
from each. Every YAML Ray accepts we accept with the same values; every YAML Ray refuses we
refuse with one line per problem naming its path.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray.autoscaler
import yaml
from ray.autoscaler._private import util as ray_util
from ray.autoscaler._private.gcp.config import get_node_type

from model.config import ClusterConfig, ConfigError, parse_cluster_config
from model.config.cluster import DEFAULTS_FILE

RAY_GCP = Path(ray.autoscaler.__file__).parent / "gcp"
RAY_DEFAULTS = RAY_GCP / "defaults.yaml"
OUR_COPIES = Path(__file__).resolve().parents[2] / "stacks" / "clusters"
PROJECT = "differential-project"

# Our GCP defaults are Ray's but for these commands, each for a reason.
DEFAULT_COMMAND_DEVIATIONS = {
    "setup_commands": "Ray's default pip-installs a Python 3.7 nightly wheel that no current "
    "image can install; ours installs ray[default] from PyPI when ray is missing",
    "head_setup_commands": "Ray pins google-api-python-client 1.7.8 (2019); the head's "
    "autoscaler needs a current one",
    "head_start_ray_commands": "the dashboard stays on localhost, reached with "
    "`invoke attach -p 8265`, instead of --dashboard-host=0.0.0.0",
}


def _read(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def test_our_gcp_defaults_are_rays_but_for_the_listed_commands():
    ours, rays = _read(DEFAULTS_FILE), _read(RAY_DEFAULTS)
    differing = {key for key in {*ours, *rays} if ours.get(key) != rays.get(key)}
    assert differing == set(DEFAULT_COMMAND_DEVIATIONS)


@pytest.fixture(autouse=True)
def _rays_defaults_with_our_listed_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray fills from its own defaults.yaml, except the commands listed above (compared
    on their own by the test before)."""
    ours = _read(DEFAULTS_FILE)

    def defaults(provider_config: dict[str, Any]) -> dict[str, Any]:
        rays = _read(RAY_DEFAULTS)
        rays.update({key: copy.deepcopy(ours[key]) for key in DEFAULT_COMMAND_DEVIATIONS})
        return rays

    monkeypatch.setattr(ray_util, "_get_default_config", defaults)


def ray_loads(raw: dict[str, Any]) -> dict[str, Any] | Exception:
    """What `ray up` makes of the YAML before it calls GCP, or the error it stops with."""
    try:
        prepared = ray_util.prepare_config(copy.deepcopy(raw))
        ray_util.validate_config(copy.deepcopy(prepared))
        ray_util.check_legacy_fields(prepared)  # bootstrap_gcp's first step
        provider = prepared["provider"]
        if provider.get("project_id") is None:  # _configure_project's assertion
            raise AssertionError("'project_id' must be set in the 'provider' section")
        provider["region"], provider["availability_zone"]  # noqa: B018  (read by bootstrap)
        for node_type in prepared["available_node_types"].values():
            get_node_type(node_type["node_config"])
    except Exception as exc:  # noqa: BLE001  (any failure of Ray's is a refusal)
        return exc
    return prepared


# ---------------------------------------------------------------- inputs and their variants


def _with_project(raw: dict[str, Any]) -> dict[str, Any]:
    """Ray's example YAMLs leave project_id null: the same one is supplied to both."""
    raw = copy.deepcopy(raw)
    provider = raw.setdefault("provider", {})
    if not provider.get("project_id"):
        provider["project_id"] = PROJECT
    return raw


def bases() -> dict[str, dict[str, Any]]:
    found = {f"ray-wheel/{p.name}": _read(p) for p in sorted(RAY_GCP.glob("*.yaml"))}
    found |= {f"ours/{p.name}": _read(p) for p in sorted(OUR_COPIES.glob("*.yaml"))}
    return {name: _with_project(raw) for name, raw in found.items()}


Variant = Callable[[dict[str, Any]], None]


def _types(raw: dict[str, Any]) -> dict[str, Any]:
    return raw.get("available_node_types") or {}


def _worker_names(raw: dict[str, Any]) -> list[str]:
    head = raw.get("head_node_type", "ray_head_default")
    return [name for name in _types(raw) if name != head]


def _set(key: str, value: Any) -> Variant:
    return lambda raw: raw.__setitem__(key, copy.deepcopy(value))


def _per_type(change: Callable[[dict[str, Any]], None]) -> Variant:
    def apply(raw: dict[str, Any]) -> None:
        for node_type in _types(raw).values():
            change(node_type)

    return apply


def _drop_workers(raw: dict[str, Any]) -> None:
    for name in _worker_names(raw):
        del raw["available_node_types"][name]


def _add_types(count: int) -> Variant:
    def apply(raw: dict[str, Any]) -> None:
        types = raw.get("available_node_types")
        if not types:
            return
        template = types[(_worker_names(raw) or list(types))[0]]
        for index in range(count):
            types[f"added_{index}"] = {**copy.deepcopy(template), "max_workers": index + 1}

    return apply


def _own_worker_commands(raw: dict[str, Any]) -> None:
    for name in _worker_names(raw)[:1]:
        raw["available_node_types"][name]["worker_setup_commands"] = ["echo own setup"]
        raw["available_node_types"][name]["initialization_commands"] = ["echo own init"]


VARIANTS: dict[str, Variant] = {
    "as-written": lambda raw: None,
    "no-head_node_type": lambda raw: raw.pop("head_node_type", None),
    "no-available_node_types": lambda raw: raw.pop("available_node_types", None),
    "types-without-head_node_type": lambda raw: (
        raw.pop("head_node_type", None),
        raw.setdefault("available_node_types", {}).update(
            {"mine": {"resources": {}, "node_config": {"machineType": "n1-standard-2"}}}),
        raw["available_node_types"].pop("ray_head_default", None),
    ),
    "no-min_workers": _per_type(lambda t: t.pop("min_workers", None)),
    "no-max_workers": _per_type(lambda t: t.pop("max_workers", None)),
    "empty-resources": _per_type(lambda t: t.__setitem__("resources", {})),
    "no-resources": _per_type(lambda t: t.pop("resources", None)),
    "head-only": _drop_workers,
    "three-more-types": _add_types(3),
    "max_workers-10": _set("max_workers", 10),
    "max_workers-0": _set("max_workers", 0),
    "idle-1": _set("idle_timeout_minutes", 1),
    "upscaling-0": _set("upscaling_speed", 0),
    "own-setup": _set("setup_commands", ["echo common"]),
    "own-worker-setup": _set("worker_setup_commands", ["echo worker"]),
    "own-init": _set("initialization_commands", ["echo init"]),
    "own-starts": lambda raw: raw.update(head_start_ray_commands=["ray start --head"],
                                         worker_start_ray_commands=["ray start --address=x"]),
    "type-own-commands": _own_worker_commands,
    "no-setup_commands": lambda raw: raw.pop("setup_commands", None),
    "no-commands": lambda raw: [raw.pop(k, None) for k in list(raw) if k.endswith("_commands")],
    "docker-image-and-name": _set("docker", {"image": "rayproject/ray:2.9",
                                             "container_name": "ray_container"}),
    "docker-image-only": _set("docker", {"image": "rayproject/ray:2.9"}),
    "docker-name-only": _set("docker", {"container_name": "ray_container"}),
    "docker-role-images": _set("docker", {"head_image": "h:1", "worker_image": "w:1",
                                          "container_name": "c"}),
    "docker-empty": _set("docker", {}),
    "no-docker": lambda raw: raw.pop("docker", None),
    "empty-legacy-keys": lambda raw: raw.update(head_node={}, worker_nodes={}),
    "legacy-head_node": _set("head_node", {"machineType": "n1-standard-2"}),
    "top-level-min_workers": _set("min_workers", 1),
    "user-metadata": _set("metadata", {"team": "ml"}),
    "unknown-top-level-key": _set("max_worker", 3),
    "unknown-node-type-key": _per_type(lambda t: t.__setitem__("min_worker", 1)),
    "type-idle-and-priority": _per_type(lambda t: t.update(idle_timeout_s=30, priority=1)),
    "unused-provider-key": lambda raw: raw["provider"].update(disable_node_updaters=False),
    "no-project_id": lambda raw: raw["provider"].pop("project_id"),
    "min-above-cluster-max": lambda raw: [
        raw["available_node_types"][n].__setitem__("min_workers", 5) for n in _worker_names(raw)
    ] and raw.__setitem__("max_workers", 1),
    "no-machineType": lambda raw: [
        t["node_config"].pop("machineType", None) for t in _types(raw).values()
    ],
}


def cases() -> Iterator[Any]:
    for base_name, base in bases().items():
        for variant_name, variant in VARIANTS.items():
            raw = copy.deepcopy(base)
            variant(raw)
            yield pytest.param(raw, id=f"{base_name}:{variant_name}")


# ---------------------------------------------------------------- the comparison


def assert_same_as_ray(ours: ClusterConfig, ray: dict[str, Any]) -> None:
    assert ours.head_node_type == ray["head_node_type"]
    assert set(ours.available_node_types) == set(ray["available_node_types"])
    for name, theirs in ray["available_node_types"].items():
        mine = ours.available_node_types[name]
        assert (mine.min_workers, mine.max_workers) == (
            theirs["min_workers"], theirs["max_workers"]), name
        assert mine.resources == theirs["resources"], name
        assert mine.labels == theirs.get("labels", {}), name
        assert (mine.idle_timeout_s, mine.priority) == (
            theirs.get("idle_timeout_s"), theirs.get("priority")), name
        # Ray's autoscaler takes a type's own list over the merged one (worker nodes only).
        assert ours.setup_commands_for("worker", name) == theirs.get(
            "worker_setup_commands", ray["worker_setup_commands"]), name
        assert ours.initialization_commands_for("worker", name) == theirs.get(
            "initialization_commands", ray["initialization_commands"]), name
        assert mine.is_tpu == (get_node_type(theirs["node_config"]).value == "tpu"), name
    assert ours.setup_commands_for("head", ours.head_node_type) == ray["head_setup_commands"]
    for key in ("cluster_name", "max_workers", "upscaling_speed", "idle_timeout_minutes",
                "initialization_commands", "head_start_ray_commands",
                "worker_start_ray_commands", "file_mounts", "cluster_synced_files",
                "file_mounts_sync_continuously", "rsync_exclude", "rsync_filter"):
        assert getattr(ours, key) == ray[key], key
    assert ours.metadata == ray.get("metadata", {})
    docker = ray["docker"]
    for key, value in docker.items():
        assert getattr(ours.docker, key) == value, f"docker.{key}"
    assert ours.docker.enabled == bool(docker.get("container_name"))
    for key in ("region", "availability_zone", "project_id", "cache_stopped_nodes",
                "use_internal_ips"):
        if key in ray["provider"]:
            assert getattr(ours.provider, key) == ray["provider"][key], f"provider.{key}"
    assert ours.auth.ssh_user == ray["auth"].get("ssh_user", "ubuntu")


@pytest.mark.parametrize("raw", list(cases()))
def test_we_accept_and_fill_what_ray_accepts_and_refuse_what_it_refuses(raw: dict[str, Any]):
    expected = ray_loads(raw)
    try:
        ours = parse_cluster_config(copy.deepcopy(raw), "cluster.yaml")
    except ConfigError as refused:
        assert isinstance(expected, Exception), f"Ray accepts it, we say: {refused}"
        lines = str(refused).splitlines()
        assert lines[0] == "invalid cluster config cluster.yaml:"
        assert len(lines) == 1 + len(refused.problems) and refused.problems
        assert all(path for path, _ in refused.problems), refused.problems
        return
    assert not isinstance(expected, Exception), f"Ray refuses it ({expected!r}), we accept"
    assert_same_as_ray(ours, expected)
    for key in set(raw) - set(expected):  # what Ray dropped, we dropped with a warning
        assert any(w.startswith(f"{key}:") for w in ours.warnings), key


def _worker(raw: dict[str, Any]) -> dict[str, Any]:
    return raw["available_node_types"]["ray_worker_small"]


# YAMLs Ray's loader takes that GCE (or the per-type range) would refuse later: refused now,
# at the path, with the fix.
STRICTER_THAN_RAY = {
    "cluster_name": lambda raw: raw.update(cluster_name="My_Cluster"),  # prefixes GCE names
    "available_node_types.ray_worker_small.min_workers": lambda raw: _worker(raw).update(
        min_workers=2, max_workers=1),
    "available_node_types.a.b": lambda raw: raw["available_node_types"].update(
        {"a.b": copy.deepcopy(_worker(raw))}),  # a type name is a GCE label value
    "provider.availability_zone": lambda raw: raw["provider"].update(
        availability_zone="us-east1-b"),
    "available_node_types.ray_worker_small.node_config.scheduling": lambda raw: _worker(
        raw)["node_config"].update(guestAccelerators=[{"acceleratorType": "nvidia-tesla-t4"}],
                                   scheduling={"onHostMaintenance": "MIGRATE"}),
}


@pytest.mark.parametrize("path", sorted(STRICTER_THAN_RAY))
def test_what_gce_would_refuse_later_is_refused_now_at_its_path(path: str):
    raw = bases()["ours/full.yaml"]
    STRICTER_THAN_RAY[path](raw)
    assert not isinstance(ray_loads(raw), Exception), "Ray's loader takes it"
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(raw)
    assert path in dict(caught.value.problems)


# Keys Ray's schema takes that this project cannot honour: refused, saying why.
NOT_HONOURED = {
    "auth.ssh_proxy_command": lambda raw: raw["auth"].update(ssh_proxy_command="nc %h %p"),
    "auth.ssh_proxy_use_node_id": lambda raw: raw["auth"].update(
        ssh_proxy_use_node_id=True, ssh_proxy_command="nc %h %p"),
    "docker.use_podman": lambda raw: raw["docker"].update(use_podman=True),
}


@pytest.mark.parametrize("path", sorted(NOT_HONOURED))
def test_ray_keys_we_cannot_honour_are_refused_saying_why(path: str):
    raw = bases()["ours/full.yaml"]
    NOT_HONOURED[path](raw)
    assert not isinstance(ray_loads(raw), Exception), "Ray takes it"
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(raw)
    assert "remove" in dict(caught.value.problems)[path]


def test_own_types_without_head_node_type_take_rays_default_or_say_what_to_set():
    """Ray's example-minimal-pinned.yaml names its types like the defaults and sets no
    head_node_type: Ray's default applies. With other names, the fix is named."""
    raw = bases()["ours/full.yaml"]
    del raw["head_node_type"]
    assert parse_cluster_config(copy.deepcopy(raw)).head_node_type == "ray_head_default"
    types = raw["available_node_types"]
    types["head"] = types.pop("ray_head_default")
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(raw)
    assert "set head_node_type to one of ['head', 'ray_worker_small']" in dict(
        caught.value.problems)["head_node_type"]
