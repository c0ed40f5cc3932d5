"""`~/ray_bootstrap_config.yaml`: valid for Ray's own schema and provider, node bodies kept."""

from __future__ import annotations

import copy

import pytest
from ray.autoscaler._private.util import validate_config

from bootstrap.autoscaler_config import autoscaler_config
from model.config import load_cluster_config, parse_cluster_config
from tests.support.bootstrap_stubs import SHIPPED_STACKS, cluster


def _bodies(config) -> dict[str, dict]:
    """Stand-ins for the program's final bodies (with a startup script in metadata)."""
    bodies = {}
    for name, node_type in config.available_node_types.items():
        body = node_type.node_config.body()
        body["metadata"] = {"items": [{"key": "startup-script", "value": f"#!/bin/sh\n{name}"}]}
        bodies[name] = body
    return bodies


@pytest.mark.parametrize("stack", SHIPPED_STACKS, ids=lambda p: p.stem)
def test_every_shipped_stack_gives_a_config_rays_schema_accepts(stack):
    config = load_cluster_config(stack)
    validate_config(autoscaler_config(config, _bodies(config)))


def test_node_configs_are_kept_exactly_as_given():
    config = cluster()
    bodies = _bodies(config)
    given = copy.deepcopy(bodies)
    result = autoscaler_config(config, bodies)
    for name, body in given.items():
        assert result["available_node_types"][name]["node_config"] == body
    result["available_node_types"]["head_t"]["node_config"]["x"] = 1
    assert "x" not in bodies["head_t"]  # a copy: the program's dicts stay untouched


def test_auth_points_at_the_key_copied_to_the_head():
    result = autoscaler_config(cluster(auth={"ssh_user": "ray"}), _bodies(cluster()))
    assert result["auth"] == {"ssh_user": "ray", "ssh_private_key": "~/ray_bootstrap_key.pem"}


def test_provider_is_the_heads_own_with_what_rays_gcp_provider_reads():
    config = cluster()
    provider = autoscaler_config(config, _bodies(config))["provider"]
    assert provider["type"] == "external"
    assert provider["module"] == "ray_gcp_head_provider.provider.HeadNodeProvider"
    assert provider["project_id"] == "my-gcp-project"
    assert provider["availability_zone"] == "us-west1-a"
    assert provider["region"] == "us-west1"
    assert "_has_tpus" not in provider
    assert "gcp_credentials" not in provider
    assert "capacity" not in provider  # no type falls back


def test_provider_tells_the_heads_provider_which_spot_types_fall_back():
    spot = {"machineType": "n1-standard-2", "scheduling": {"provisioningModel": "SPOT"}}
    config = cluster(
        available_node_types={
            "head_t": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
            "spot_t": {"resources": {"CPU": 2}, "node_config": spot},
            "plain_t": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
        },
        provider={"type": "gcp", "region": "us-west1", "availability_zone": "us-west1-a",
                  "project_id": "my-gcp-project",
                  "capacity": {"spot_t": {"fallback": "on-demand", "return_to_spot": True}}})
    provider = autoscaler_config(config, _bodies(config))["provider"]
    assert provider["capacity"] == {"spot_t": {"fallback": "on-demand", "return_to_spot": True}}


def test_a_tpu_types_pinned_twin_gets_the_pod_head_resource_from_rays_provider():
    from ray.autoscaler._private.gcp.node_provider import GCPNodeProvider

    config = load_cluster_config(next(s for s in SHIPPED_STACKS if s.stem == "tpu-pod"))
    result = autoscaler_config(config, _bodies(config), {"ray_tpu": 1})
    filled = GCPNodeProvider.fillout_available_node_types_resources(result)
    assert filled["available_node_types"]["ray_tpu.pinned"]["resources"]["TPU-v4-16-head"] == 1


def test_tpu_cluster_tells_rays_provider_to_build_a_tpu_client():
    config = load_cluster_config(next(s for s in SHIPPED_STACKS if s.stem == "tpu-pod"))
    result = autoscaler_config(config, _bodies(config))
    assert result["provider"]["_has_tpus"] is True


def test_rays_gcp_provider_adds_the_pod_head_resource_our_script_gives_host_zero():
    from ray.autoscaler._private.gcp.node_provider import GCPNodeProvider

    config = load_cluster_config(next(s for s in SHIPPED_STACKS if s.stem == "tpu-pod"))
    result = autoscaler_config(config, _bodies(config))
    filled = GCPNodeProvider.fillout_available_node_types_resources(result)
    assert filled["available_node_types"]["ray_tpu"]["resources"]["TPU-v4-16-head"] == 1


def test_file_mounts_point_at_their_remote_paths_on_the_head(tmp_path):
    config = cluster(file_mounts={"~/data": str(tmp_path)})
    assert autoscaler_config(config, _bodies(config))["file_mounts"] == {"~/data": "~/data"}


def test_missing_node_body_is_an_error_naming_the_type():
    config = cluster()
    with pytest.raises(ValueError, match="worker_t"):
        autoscaler_config(config, {"head_t": {}})


def _three_types(version: str):
    return cluster(max_workers=5, provider={
        "type": "gcp", "region": "us-west1", "availability_zone": "us-west1-a",
        "project_id": "my-gcp-project", "autoscaler_version": version,
    }, available_node_types={
        "head_t": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
        "worker_t": {"resources": {"CPU": 4}, "min_workers": 1, "max_workers": 3,
                     "node_config": {"machineType": "n1-standard-2"}},
        "other_t": {"resources": {"CPU": 8}, "min_workers": 1, "max_workers": 2,
                    "node_config": {"machineType": "n1-standard-8"}},
    })


def test_min_workers_is_what_pulumis_workers_leave_to_the_autoscaler_v1():
    config = _three_types("v1")
    data = autoscaler_config(config, _bodies(config), {"worker_t": 3})
    types = data["available_node_types"]
    assert types["worker_t"]["min_workers"] == 0  # Pulumi keeps 3 >= 1
    assert types["worker_t"]["max_workers"] == 3  # ours count against it in Ray's scheduler
    assert data["max_workers"] == 5
    assert types["other_t"]["min_workers"] == 1  # no count given: the YAML's own
    assert types["head_t"]["min_workers"] == 0


def test_v2_counts_pulumis_workers_as_each_types_pinned_twin():
    """v2 drops unmanaged nodes: the head's provider lists them as workers of their type's
    twin, which has room for the type's maximum (a lowered count never scales one down) and is
    never made up to a minimum or retired when idle; the type keeps what the count leaves, and
    the cluster's maximum counts Pulumi's nodes (bootstrap/head_provider/pinned.py)."""
    config = _three_types("v2")
    data = autoscaler_config(config, _bodies(config), {"worker_t": 2, "other_t": 1})
    types = data["available_node_types"]
    assert (types["worker_t"]["min_workers"], types["worker_t"]["max_workers"]) == (0, 1)
    assert (types["other_t"]["min_workers"], types["other_t"]["max_workers"]) == (0, 1)
    twin = types["worker_t.pinned"]
    assert (twin["min_workers"], twin["max_workers"]) == (0, 3)
    assert twin["idle_timeout_s"] >= 100 * 365 * 24 * 3600
    assert twin["priority"] < types["worker_t"].get("priority", 0)
    assert twin["resources"] == types["worker_t"]["resources"]
    # Never launched: of the body only what Ray's GCP provider reads (instance or TPU node).
    assert twin["node_config"] == {
        "machineType": types["worker_t"]["node_config"]["machineType"]}
    assert types["other_t.pinned"]["max_workers"] == 2
    assert types["head_t.pinned"]["max_workers"] == 0  # the head's type has no workers
    assert data["max_workers"] == 5  # the YAML's: v2 counts Pulumi's nodes
    assert data["provider"]["pinned_types"] == {
        "head_t.pinned": "head_t", "worker_t.pinned": "worker_t", "other_t.pinned": "other_t"}
    validate_config(data)


def test_v1_config_has_no_pinned_twins():
    config = _three_types("v1")
    data = autoscaler_config(config, _bodies(config), {"worker_t": 2})
    assert set(data["available_node_types"]) == {"head_t", "worker_t", "other_t"}
    assert "pinned_types" not in data["provider"]


def test_v1_head_config_is_the_same_whatever_count_pulumi_keeps():
    """No window in which the head's autoscaler sees a new minimum before the group acts."""
    config = cluster(provider={"type": "gcp", "region": "us-west1",
                               "availability_zone": "us-west1-a", "project_id": "my-gcp-project",
                               "autoscaler_version": "v1"})  # worker_t: min 1, max 2
    written = [autoscaler_config(config, _bodies(config), {"worker_t": n}) for n in (1, 2)]
    assert written[0] == written[1]
    validate_config(written[1])


@pytest.mark.parametrize("stack", SHIPPED_STACKS, ids=lambda p: p.stem)
def test_role_commands_are_prepared_like_ray_up_writes_them(stack):
    """The head's autoscaler reads the file as is (no merge of its own) when it sets up the
    workers it launches: their commands must already start with `setup_commands`."""
    from ray.autoscaler._private.util import prepare_config

    config = load_cluster_config(stack)
    written = autoscaler_config(config, _bodies(config))
    raw = {**config.ray_dict(), "provider": written["provider"], "auth": written["auth"]}
    prepared = prepare_config(copy.deepcopy(raw))
    for key in ("head_setup_commands", "worker_setup_commands"):
        assert written[key] == prepared[key]
        assert written[key][: len(config.setup_commands)] == config.setup_commands


def test_a_types_own_worker_setup_commands_replace_the_clusters():
    """Ray's autoscaler takes a type's own list instead of the merged one
    (`_get_node_type_specific_fields`), `setup_commands` included."""
    config = load_cluster_config(
        next(p for p in SHIPPED_STACKS if p.stem == "full"))
    data = config.ray_dict()
    data["setup_commands"] = ["echo common"]
    data["available_node_types"]["ray_worker_small"]["worker_setup_commands"] = ["echo own"]
    typed = parse_cluster_config(data)
    written = autoscaler_config(typed, _bodies(typed))
    assert written["available_node_types"]["ray_worker_small"]["worker_setup_commands"] == [
        "echo own"]
    assert typed.setup_commands_for("worker", "ray_worker_small") == ["echo own"]


def test_rays_node_updaters_are_off_because_every_node_boots_itself():
    """Ray's autoscaler would otherwise SSH into each new node and rerun setup and `ray stop`
    while the node's own startup script is still at work."""
    from ray.autoscaler._private.constants import DISABLE_NODE_UPDATERS_KEY

    config = cluster()
    written = autoscaler_config(config, _bodies(config))
    assert written["provider"][DISABLE_NODE_UPDATERS_KEY] is True
    validate_config(written)
