"""The rendered startup script: one per shipped stack and node, shellcheck-clean, with its
stages, docker steps and resources in the right place."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from bootstrap_stubs import SHIPPED_STACKS, cluster

from bootstrap import node_metadata, render_startup_script
from bootstrap.startup_script import HEAD_ONLY_STAGES, STAGES
from infra.config import load_cluster_config


def _nodes(stack: Path) -> list[tuple[str, str]]:
    config = load_cluster_config(stack)
    return [("head", config.head_node_type)] + [
        ("worker", name) for name in config.worker_types
    ]


CASES = [
    pytest.param(stack, role, node_type, id=f"{stack.stem}-{role}-{node_type}")
    for stack in SHIPPED_STACKS
    for role, node_type in _nodes(stack)
]


def _steps(script: str) -> str:
    """The rendered step list (the library above it defines functions of the same names)."""
    return script.split("# ---- the steps, in order", 1)[1]


def _stages(script: str) -> list[str]:
    return re.findall(r"^begin_stage (\S+)$", script, re.MULTILINE)


@pytest.mark.parametrize(("stack", "role", "node_type"), CASES)
def test_every_shipped_node_script_is_shellcheck_clean(stack, role, node_type, tmp_path):
    script = tmp_path / "startup-script"
    script.write_text(render_startup_script(load_cluster_config(stack), role, node_type))
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    result = subprocess.run(["shellcheck", "-s", "sh", str(script)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(("stack", "role", "node_type"), CASES)
def test_stages_follow_rays_order(stack, role, node_type):
    config = load_cluster_config(stack)
    stages = _stages(render_startup_script(config, role, node_type))
    expected = [s for s in STAGES if (config.docker.enabled or not s.startswith("docker-"))
                and (role == "head" or s not in HEAD_ONLY_STAGES)]
    assert stages == expected


def test_docker_stack_pulls_and_runs_before_setup_and_start_inside_container():
    config = load_cluster_config(next(s for s in SHIPPED_STACKS if s.stem == "full"))
    script = render_startup_script(config, "head", config.head_node_type)
    steps = _steps(script)
    order = [steps.index(step) for step in (
        "begin_stage initialization", "docker_pull", "docker_start",
        "docker_copy_bootstrap_files", "run_node 'pip install google-api-python-client'",
        "run_node 'ray start --head")]
    assert order == sorted(order)
    assert "DOCKER_IMAGE='rayproject/ray-ml:latest-gpu'" in script
    assert "DOCKER_RUN_OPTIONS='--ulimit nofile=65536:65536'" in script


def test_stack_without_docker_has_no_docker_steps():
    config = load_cluster_config(next(s for s in SHIPPED_STACKS if s.stem == "minimal"))
    script = render_startup_script(config, "worker", "ray_worker_small")
    assert "docker_" not in _steps(script)
    assert "DOCKER_IMAGE=''" in script


def test_head_and_worker_images_win_over_image():
    config = cluster(docker={"image": "base:1", "head_image": "head:1", "worker_image": "w:1"})
    assert "DOCKER_IMAGE='head:1'" in render_startup_script(config, "head", "head_t")
    assert "DOCKER_IMAGE='w:1'" in render_startup_script(config, "worker", "worker_t")


def test_worker_start_command_keeps_ray_head_ip_for_run_time():
    steps = _steps(render_startup_script(cluster(), "worker", "worker_t"))
    assert "run_node 'ray start --address=$RAY_HEAD_IP:6379'" in steps
    assert steps.index("resolve_head_ip") < steps.index("run_node 'ray start")


def test_only_the_head_writes_the_bootstrap_config():
    assert "write_bootstrap_files" in _steps(render_startup_script(cluster(), "head", "head_t"))
    worker = _steps(render_startup_script(cluster(), "worker", "worker_t"))
    assert "write_bootstrap_files" not in worker


def test_tpu_pod_first_host_gets_the_pod_head_resource():
    config = load_cluster_config(next(s for s in SHIPPED_STACKS if s.stem == "tpu-pod"))
    script = render_startup_script(config, "worker", "ray_tpu")
    assert "NODE_IS_TPU='true'" in script
    assert """RESOURCES_JSON='{"TPU": 4}'""" in script
    assert """RESOURCES_JSON_TPU_HOST0='{"TPU": 4, "TPU-v4-16-head": 1}'""" in script


def test_tpu_topology_names_the_pod_head_resource_by_type():
    config = load_cluster_config(next(s for s in SHIPPED_STACKS if s.stem == "tpu-pod-topology"))
    assert '"TPU-v4-8-head": 1' in render_startup_script(config, "worker", "ray_tpu")


def test_unknown_node_type_is_rejected_with_the_known_ones():
    with pytest.raises(ValueError, match="head_t"):
        render_startup_script(cluster(), "worker", "nope")


def test_node_metadata_turns_on_guest_attributes_for_status():
    metadata = node_metadata(cluster(), "worker", "worker_t")
    assert metadata["enable-guest-attributes"] == "TRUE"
    assert metadata["startup-script"].startswith("#!/bin/sh\n")


def test_node_types_own_docker_settings_apply_to_its_workers_only():
    config = cluster(
        docker={"image": "base:1", "run_options": ["--a"], "worker_run_options": ["--w"]},
        available_node_types={
            "head_t": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"},
                       "docker": {"worker_image": "own:1", "worker_run_options": ["--own"],
                                  "pull_before_run": False}},
            "worker_t": {"resources": {"CPU": 4}, "min_workers": 1,
                         "node_config": {"machineType": "n1-standard-2"},
                         "docker": {"worker_image": "own:1", "worker_run_options": ["--own"],
                                    "pull_before_run": False}},
        })
    worker = render_startup_script(config, "worker", "worker_t")
    assert "DOCKER_IMAGE='own:1'" in worker
    assert "DOCKER_RUN_OPTIONS='--a --own'" in worker
    assert "DOCKER_PULL_BEFORE_RUN='false'" in worker
    head = render_startup_script(config, "head", "head_t")
    assert "DOCKER_IMAGE='base:1'" in head
    assert "DOCKER_RUN_OPTIONS='--a'" in head
    assert "DOCKER_PULL_BEFORE_RUN='true'" in head
