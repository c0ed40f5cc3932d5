"""What `invoke adopt` finds of a cluster Ray's own launcher made (tests/support/ray_launcher.py,
at the fake cloud), read through ops/adopt/cloud.py as the task reads it, and judged against the
YAML: the workers split between the worker group and the autoscaler, and each thing that cannot
be adopted said plainly with its way out, before any stack is written."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from model.adoption import read_adoption
from model.config import parse_cluster_config
from model.plan import resolve_worker_counts
from ops.adopt.cloud import read_ray_made
from ops.adopt.run import adopt
from ops.adopt.survey import Survey, same_image, survey
from ops.errors import OpsError
from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import PROJECT_ROOT
from tests.support.ray_launcher import RayMade, point_ray_at, ray_up


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeComputeServer]:
    # Ray's key goes to this test's ~/.ssh; the engine stays where it was installed.
    monkeypatch.setenv("XDG_CACHE_HOME", os.environ.get("XDG_CACHE_HOME")
                       or str(Path.home() / ".cache"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        point_ray_at(server, monkeypatch)
        monkeypatch.setenv("RAY_GCP_API_ENDPOINT", server.endpoint)
        yield server


def full_yaml() -> dict[str, Any]:
    data = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
    data["cluster_name"] = "adopt-check"  # not a stack of the repository's
    return data


def made(data: dict[str, Any], demand: int = 0) -> RayMade:
    return ray_up(data, {"ray_worker_small": demand})


def judged(data: dict[str, Any]) -> Survey:
    config = parse_cluster_config(copy.deepcopy(data))
    found = read_ray_made(config)
    return survey(config, found.instances, found.account, found.account_roles, found.ssh_keys,
                  found.firewalls)


def test_every_running_worker_stays_the_autoscalers(fake) -> None:
    """`ray up` pins no worker, and the head keeps `ray up`'s autoscaler: every running
    worker stays its, none is the stack's, and the stack pins none by default."""
    data = full_yaml()
    ray = made(data, demand=1)
    found = judged(data)
    assert found.refusals == []
    assert found.head is not None and found.head["name"] == ray.head
    assert found.autoscaler == {"ray_worker_small": ray_order(fake, ray.workers[
        "ray_worker_small"])}  # min_workers 1 and one more, both the autoscaler's
    config = parse_cluster_config(copy.deepcopy(data))
    assert resolve_worker_counts(config, None, found.adoption) == {"ray_worker_small": 0}
    assert found.roles_imported == ["roles/compute.admin"]
    assert "roles/storage.objectAdmin" in found.roles_left  # Ray's, not the stack's
    assert len(found.ray_keys) == 1 and found.ray_keys[0].startswith("ubuntu:ssh-rsa ")


def test_a_stack_adopted_with_pinned_workers_keeps_pinning_them() -> None:
    """A stack file written when adoption still gave worker groups the oldest workers
    (`pinned`) goes on pinning those: its groups neither shrink nor grow."""
    config = parse_cluster_config(full_yaml())
    adoption = read_adoption({"head": "ray-a-head", "pinned": {"ray_worker_small": ["ray-a-w"]}})
    assert resolve_worker_counts(config, None, adoption) == {"ray_worker_small": 1}


def ray_order(fake: FakeComputeServer, names: list[str]) -> list[str]:
    nodes = fake.instances("my-gcp-project", "us-west1-a")
    return sorted(names, key=lambda n: (nodes[n]["creationTimestamp"], n))


def test_a_machine_that_no_longer_matches_the_yaml_is_refused_naming_both(fake) -> None:
    data = full_yaml()
    made(data)
    data["available_node_types"]["ray_worker_small"]["node_config"]["machineType"] = \
        "n1-standard-8"
    data["available_node_types"]["ray_head_default"]["node_config"]["disks"][0][
        "initializeParams"]["sourceImage"] = "projects/ubuntu-os-cloud/global/images/family/x"
    refusals = judged(data).refusals
    assert any("machineType is 'n1-standard-2', the YAML says 'n1-standard-8'" in r
               and "Put back the node_config `ray up` used" in r for r in refusals), refusals
    assert any("boot image is 'projects/deeplearning-platform-release/global/images/family/"
               "common-cpu'" in r for r in refusals), refusals


def test_a_cluster_made_from_another_yaml_is_refused(fake) -> None:
    data = full_yaml()
    made(data)
    types = data["available_node_types"]
    types["ray_worker_big"] = types.pop("ray_worker_small")
    refusals = judged(data).refusals
    assert any("of type 'ray_worker_small', which the YAML has no longer" in r
               and "the YAML `ray up` used" in r for r in refusals), refusals


def test_no_cluster_of_that_name_is_said_with_where_it_looked(fake) -> None:
    data = full_yaml()
    made(data)
    refusals = judged({**data, "cluster_name": "another"}).refusals
    assert refusals == ["no node of Ray cluster 'another' in project my-gcp-project, zone "
                        "us-west1-a (Ray's label ray-cluster-name=another): check cluster_name, "
                        "provider.project_id and provider.availability_zone against the YAML "
                        "`ray up` used"]


def test_tpu_node_types_are_refused() -> None:
    data = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/tpu.yaml").read_text())
    config = parse_cluster_config(data)
    found = survey(config, [], None, [], [], [])
    assert any(r.startswith("TPU node types") and "`invoke up -c`" in r
               for r in found.refusals), found.refusals


def test_a_refused_adoption_writes_no_stack(fake, tmp_path: Path) -> None:
    data = full_yaml()
    made(data)
    data["available_node_types"]["ray_worker_small"]["node_config"]["machineType"] = \
        "n1-standard-8"
    cluster_yaml = tmp_path / "cluster.yaml"
    cluster_yaml.write_text(yaml.safe_dump(data))
    with pytest.raises(OpsError, match="nothing adopted: 1 thing"):
        adopt(str(cluster_yaml), yes=True)
    assert not (tmp_path / "state" / "stacks").exists()


def test_an_image_family_matches_its_images() -> None:
    family = "projects/deeplearning-platform-release/global/images/family/common-cpu"
    assert same_image(family, family)
    assert same_image(family, "https://www.googleapis.com/compute/v1/projects/"
                              "deeplearning-platform-release/global/images/common-cpu-v20240922")
    assert not same_image(family, "projects/deeplearning-platform-release/global/images/"
                                  "common-gpu-v20240922")
    assert not same_image(family, "projects/other/global/images/common-cpu-v1")
