"""Names Google Cloud does not have are refused when the YAML is read, before anything is
created: a misspelled or malformed machine type, GPU, TPU type, region or zone is one line
naming its YAML path and the nearest real names; a TPU generation in a zone that does not
offer it names the zones that do; a GPU count or a custom shape GCE refuses says what it takes.
A name shaped like a real one but missing from the shipped catalog is a warning naming the
catalog's date, among the warnings `plan` and `up` show (the catalog lags Google; `invoke
preflight` asks the live API)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from model.config import ConfigError, load_cluster_config
from model.config.catalog import as_of
from model.yaml_text import load_shipped_yaml
from tests.support.bootstrap_stubs import cluster
from tests.support.warm_python import run_module

PROJECT_ROOT = Path(__file__).resolve().parents[2]
HEAD = "available_node_types.head_t.node_config"
WORKER = "available_node_types.worker_t.node_config"
TERMINATE = {"onHostMaintenance": "TERMINATE"}


def _cluster(worker: dict[str, Any] | None = None, region: str = "us-west1",
             zone: str = "us-west1-a", head: dict[str, Any] | None = None) -> Any:
    return cluster(
        provider={"type": "gcp", "region": region, "availability_zone": zone,
                  "project_id": "my-gcp-project"},
        available_node_types={
            "head_t": {"resources": {"CPU": 2},
                       "node_config": head or {"machineType": "n1-standard-2"}},
            "worker_t": {"resources": {"CPU": 4}, "min_workers": 1,
                         "node_config": worker or {"machineType": "n1-standard-2"}},
        })


def _problems(**kwargs: Any) -> dict[str, str]:
    with pytest.raises(ConfigError) as error:
        _cluster(**kwargs)
    assert "\n" not in "".join(m for _, m in error.value.problems)
    return dict(error.value.problems)


def _tpu(accelerator: dict[str, Any]) -> dict[str, Any]:
    return {**accelerator, "runtimeVersion": "tpu-ubuntu2204-base"}


# ---------------------------------------------------------------- the four names


def test_a_misspelled_machine_type_names_the_real_one():
    problems = _problems(head={"machineType": "n2-standrad-8"})
    assert problems[f"{HEAD}.machineType"].startswith(
        "'n2-standrad-8' is not a GCE machine type: did you mean n2-standard-8")


def test_a_misspelled_gpu_names_the_real_one():
    problems = _problems(worker={"machineType": "n1-standard-4", "scheduling": TERMINATE,
                                 "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4x"}]})
    assert problems[f"{WORKER}.guestAccelerators[0].acceleratorType"].startswith(
        "'nvidia-tesla-t4x' is not a GCE GPU type: did you mean nvidia-tesla-t4")


def test_a_tpu_generation_in_a_zone_that_does_not_offer_it_names_the_zones_that_do():
    problems = _problems(worker=_tpu({"acceleratorType": "v4-8"}), region="us-central1",
                         zone="us-central1-a")
    message = problems[f"{WORKER}.acceleratorType"]
    assert message.startswith("TPU v4 is offered only in us-central2-b")
    assert f"catalog of {as_of()}" in message and "v5litepod" in message


def test_a_region_without_its_number_is_refused_with_the_real_regions():
    problems = _problems(region="us-central", zone="us-central-a")
    assert "provider.region" in problems and "us-central1" in problems["provider.region"]
    assert "us-central-a" not in problems["provider.region"]


def test_a_malformed_zone_names_the_regions_zones():
    problems = _problems(region="us-central1", zone="us-central1a")
    assert problems["provider.availability_zone"].startswith(
        "'us-central1a' is not a GCE zone (they look like us-central1-a): did you mean "
        "us-central1-a or ")


# ---------------------------------------------------------------- warnings: shaped, unlisted


@pytest.mark.parametrize(("change", "path", "named"), [
    ({"head": {"machineType": "n2-standard-6"}}, f"{HEAD}.machineType", "n2-standard-6"),
    ({"head": {"machineType": "n5-standard-8"}}, f"{HEAD}.machineType", "machine series n5"),
    ({"region": "us-west1", "zone": "us-west1-z"}, "provider.availability_zone",
     "zone us-west1-z"),
    ({"region": "us-west9", "zone": "us-west9-a"}, "provider.region", "region us-west9"),
    ({"worker": {"machineType": "n1-standard-4", "scheduling": TERMINATE,
                 "guestAccelerators": [{"acceleratorType": "nvidia-rtx-pro-6000"}]}},
     f"{WORKER}.guestAccelerators[0].acceleratorType", "GPU nvidia-rtx-pro-6000"),
    ({"worker": _tpu({"acceleratorType": "v4-24"}), "region": "us-central2",
      "zone": "us-central2-b"}, f"{WORKER}.acceleratorType", "v4-24"),
    ({"worker": _tpu({"acceleratorConfig": {"type": "V4", "topology": "2x2x3"}}),
      "region": "us-central2", "zone": "us-central2-b"}, f"{WORKER}.acceleratorConfig.topology",
     "v4 topology 2x2x3 (v4-24)"),
    ({"worker": _tpu({"acceleratorType": "v7-8"}), "region": "us-central2",
      "zone": "us-central2-b"}, f"{WORKER}.acceleratorType", "TPU generation v7"),
])
def test_a_name_shaped_like_a_real_one_but_not_in_the_catalog_is_a_warning(change, path, named):
    config = _cluster(**change)
    shown = "\n".join(config.review_warnings)
    assert f"{path}: {named} is not in the catalog of {as_of()}:" in shown


def test_names_in_the_catalog_pass_without_a_warning():
    config = _cluster(head={"machineType": "c3-standard-4-lssd"},
                      worker=_tpu({"acceleratorType": "v5litepod-8"}),
                      region="us-west1", zone="us-west1-c")
    assert not any("catalog" in warning for warning in config.review_warnings)


# ---------------------------------------------------------------- machine types


@pytest.mark.parametrize("machine_type", [
    "n2-custom-4-8192", "n2-custom-4-40960-ext", "custom-2-7680", "n1-standard-96",
    "e2-custom-6-12288", "n2d-custom-16-65536", "e2-micro", "g1-small",
    "zones/us-west1-a/machineTypes/n1-standard-2",
])
def test_real_machine_types_and_custom_shapes_pass(machine_type):
    config = _cluster(head={"machineType": machine_type})
    assert not [w for w in config.review_warnings if ".machineType" in w]


@pytest.mark.parametrize(("machine_type", "expected"), [
    ("n2-custom-4-40960", "at most 8.0 GiB a vCPU (32768 MB for 4): add -ext"),
    ("e2-custom-4-40960-ext", "the e2 series has no extended memory: remove -ext"),
    ("n2-custom-4-1024", "at least 0.5 GiB a vCPU (2048 MB for 4): raise it"),
    ("n2-custom-4-8000", "custom memory is a multiple of 256 MB: use 7936"),
    ("custom-3-4096", "a custom n1 shape takes 1, 2-96 in steps of 2 vCPUs, not 3"),
    ("c2-custom-4-16384", "the c2 series has no custom shapes"),
    ("N2-STANDARD-8", "is not a GCE machine type"),
])
def test_a_custom_shape_gce_refuses_says_what_it_takes(machine_type, expected):
    assert expected in _problems(head={"machineType": machine_type})[f"{HEAD}.machineType"]


# ---------------------------------------------------------------- GPUs


def test_gpus_attach_to_n1_in_the_counts_gce_takes():
    config = _cluster(worker={"machineType": "n1-standard-8", "scheduling": TERMINATE,
                              "guestAccelerators": [{"acceleratorType": "nvidia-tesla-v100",
                                                     "acceleratorCount": 8}]})
    assert config.worker_types
    problems = _problems(worker={"machineType": "n1-standard-8", "scheduling": TERMINATE,
                                 "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4",
                                                        "acceleratorCount": 3}]})
    assert problems[f"{WORKER}.guestAccelerators[0].acceleratorCount"] == (
        "nvidia-tesla-t4 on n1 comes 1, 2 or 4 to a VM, not 3: change acceleratorCount")


def test_a_gpu_on_a_series_that_takes_none_is_refused():
    problems = _problems(worker={"machineType": "n2-standard-8", "scheduling": TERMINATE,
                                 "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4"}]})
    assert "n2-standard-8 takes no nvidia-tesla-t4" in problems[f"{WORKER}.guestAccelerators[0]"]


def test_a_gpu_that_comes_only_bundled_names_the_machine_types_it_comes_with():
    problems = _problems(worker={"machineType": "n1-standard-8", "scheduling": TERMINATE,
                                 "guestAccelerators": [{"acceleratorType": "nvidia-l4"}]})
    assert "use a machine type that comes with it (g2-standard-4" in \
        problems[f"{WORKER}.guestAccelerators[0]"]


@pytest.mark.parametrize("machine_type", ["a2-highgpu-1g", "a3-highgpu-8g", "g2-standard-24"])
def test_machine_types_with_their_own_gpus_take_none_that_differ(machine_type):
    _cluster(worker={"machineType": machine_type, "scheduling": TERMINATE})
    problems = _problems(worker={"machineType": machine_type, "scheduling": TERMINATE,
                                 "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4"}]})
    assert f"{machine_type} comes with" in problems[f"{WORKER}.guestAccelerators[0]"]


def test_explicit_gpus_matching_a_bundled_type_pass():
    _cluster(worker={"machineType": "g2-standard-24", "scheduling": TERMINATE,
                     "guestAccelerators": [{"acceleratorType": "nvidia-l4",
                                            "acceleratorCount": 2}]})


def test_a_bundled_gpu_type_must_not_live_migrate():
    problems = _problems(worker={"machineType": "a2-highgpu-1g"})
    assert problems[f"{WORKER}.scheduling"].endswith(
        "set scheduling.onHostMaintenance: TERMINATE")


# ---------------------------------------------------------------- TPUs


@pytest.mark.parametrize(("accelerator", "path", "expected"), [
    ({"acceleratorType": "v5e-8"}, "acceleratorType", "did you mean v5litepod-8?"),
    ({"acceleratorType": "v4x-8"}, "acceleratorType", "did you mean v4-8?"),
    ({"acceleratorConfig": {"type": "V4", "topology": "2x2"}}, "acceleratorConfig.topology",
     "a v4 topology has 3 dimensions, not '2x2': write e.g. 2x2x1"),
    ({"acceleratorConfig": {"type": "V5E", "topology": "2x2"}}, "acceleratorConfig.type",
     "'V5E' is not a TPU type of acceleratorConfig: use"),
])
def test_a_tpu_type_the_api_does_not_have_is_refused(accelerator, path, expected):
    problems = _problems(worker=_tpu(accelerator), region="us-central2", zone="us-central2-b")
    assert expected in problems[f"{WORKER}.{path}"]


def test_an_accelerator_config_is_checked_against_its_generations_zones():
    _cluster(worker=_tpu({"acceleratorConfig": {"type": "V5LITE_POD", "topology": "2x4"}}),
             region="us-west4", zone="us-west4-a")
    problems = _problems(worker=_tpu({"acceleratorConfig": {"type": "V4", "topology": "2x2x1"}}),
                         region="us-west4", zone="us-west4-a")
    assert problems[f"{WORKER}.acceleratorConfig.type"].startswith(
        "TPU v4 is offered only in us-central2-b")


def test_a_v5e_accelerator_config_is_priced_as_v5litepod():
    config = _cluster(worker=_tpu({"acceleratorConfig": {"type": "V5LITE_POD",
                                                         "topology": "2x4"}}),
                      region="us-west4", zone="us-west4-a")
    assert config.available_node_types["worker_t"].node_config.version == "v5litepod"


# ---------------------------------------------------------------- shipped stacks


@pytest.mark.parametrize("path", sorted(Path(__file__).resolve().parents[2]
                                        .glob("stacks/clusters/*.yaml")), ids=lambda p: p.name)
def test_every_shipped_cluster_is_in_the_catalog(path):
    assert not [w for w in load_cluster_config(path).review_warnings if "catalog" in w]


BAD_NAMES = """\
cluster_name: catalog-typos
provider: {type: gcp, region: REGION, availability_zone: ZONE, project_id: my-proj}
available_node_types:
  head:
    resources: {CPU: 8}
    node_config: {machineType: n2-standrad-8}
  gpu:
    resources: {GPU: 1}
    node_config:
      machineType: n1-standard-4
      guestAccelerators: [{acceleratorType: nvidia-tesla-t4x, acceleratorCount: 1}]
      scheduling: {onHostMaintenance: TERMINATE}
  tpu:
    resources: {TPU: 4}
    node_config: {acceleratorType: v4-8, runtimeVersion: tpu-ubuntu2204-base}
head_node_type: head
"""


@pytest.mark.parametrize(("region", "zone", "named"), [
    ("us-central1", "us-central1-a", ["available_node_types.head.node_config.machineType",
                                      "available_node_types.gpu.node_config.guestAccelerators"
                                      "[0].acceleratorType",
                                      "available_node_types.tpu.node_config.acceleratorType"]),
    ("us-central", "us-central-a", ["provider.region"]),
])
def test_plan_refuses_the_names_in_one_message_writing_nothing(tmp_path, region, zone, named):
    import os

    root = Path(__file__).resolve().parents[2]
    path = tmp_path / "cluster.yaml"
    path.write_text(BAD_NAMES.replace("REGION", region).replace("ZONE", zone))
    env = {**os.environ, "RAY_GCP_STATE_DIR": str(tmp_path / "state")}
    done = run_module(["invoke", "plan", "-c", str(path)], cwd=root, env=env, timeout=300)

    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"invalid cluster config {path}:" in done.stderr
    problems = [line.strip() for line in done.stderr.splitlines() if line.startswith("  ")]
    assert [line.split(": ", 1)[0] for line in problems] == named
    assert not (root / "stacks" / "Pulumi.catalog-typos.yaml").exists()
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("shipped", sorted(
    str(path.relative_to(PROJECT_ROOT)) for path in (PROJECT_ROOT / "model").rglob("*.yaml")))
def test_every_yaml_file_the_model_ships_reads_the_same_with_libyaml_as_with_the_pure_parser(
        shipped):
    path = PROJECT_ROOT / shipped
    assert yaml.__with_libyaml__  # else both reads below are the pure parser's
    assert load_shipped_yaml(path) == yaml.safe_load(path.read_text())
