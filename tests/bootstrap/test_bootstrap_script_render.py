"""The rendered startup script: one per shipped stack and node, shellcheck-clean, with its
stages, docker steps and resources in the right place; small and deterministic, the library
compressed and the node's own data and steps in plain text."""

from __future__ import annotations

import base64
import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.node_metadata import node_metadata
from bootstrap.startup_script import (
    HEAD_ONLY_STAGES,
    LIBRARY,
    LIBRARY_DELIMITER,
    REAPPLY_LIBRARY,
    STAGES,
    library_code,
    render_startup_script,
)
from model.config import load_cluster_config
from tests.support.bootstrap_stubs import SHIPPED_STACKS, cluster
from tests.support.tools import require_tool

# was ~22 KB with the library in plain text; +2 KB re-apply; +1 KB the bucket fetch and
# autoscaler v2's environment for ray start; +0.5 KB Ray's token auth on every node
SCRIPT_SIZE_BOUND = 16 * 1024


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


def _payload(script: str) -> str:
    """The library's gzip+base64 here-document body."""
    body = script.split(f"<< '{LIBRARY_DELIMITER}'", 1)[1].split("\n", 1)[1]
    return body.split(f"\n{LIBRARY_DELIMITER}\n", 1)[0]


def _shellcheck(path: Path) -> None:
    result = subprocess.run([require_tool("shellcheck"), "-s", "sh", str(path)],
                            capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout


def _stages(script: str) -> list[str]:
    return re.findall(r"^\s*(?:begin_stage|if stage) (\S+)", script, re.MULTILINE)


@pytest.mark.parametrize(("stack", "role", "node_type"), CASES)
def test_every_shipped_node_script_is_shellcheck_clean(stack, role, node_type, tmp_path):
    script = tmp_path / "startup-script"
    script.write_text(render_startup_script(load_cluster_config(stack), role, node_type))
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    _shellcheck(script)


def test_library_is_shellcheck_clean_on_its_own():
    """The script carries it compressed, out of shellcheck's sight: it is checked here."""
    for library in (LIBRARY, REAPPLY_LIBRARY):
        assert subprocess.run(["sh", "-n", str(library)]).returncode == 0
        _shellcheck(library)


@pytest.mark.parametrize(("stack", "role", "node_type"), CASES)
def test_every_shipped_node_script_stays_under_the_size_bound(stack, role, node_type):
    """Every node_config in the head's autoscaler config carries a whole script (the config now
    lives in the cluster's bucket, but every node's own `startup-script` is a metadata value
    GCE caps at 256 KB): a bound that shows when the script grows."""
    script = render_startup_script(load_cluster_config(stack), role, node_type)
    assert len(script.encode()) < SCRIPT_SIZE_BOUND


def test_library_payload_decodes_to_the_library_without_its_comment_lines():
    config = cluster()
    payload = _payload(render_startup_script(config, "head", "head_t"))
    decoded = gzip.decompress(base64.b64decode(payload)).decode()
    assert decoded == library_code("head")
    code_lines = [line for path in (LIBRARY, REAPPLY_LIBRARY)
                  for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    assert decoded.splitlines() == code_lines
    assert "docker_start() {" in decoded and "watch_script() {" in decoded


def test_a_workers_library_leaves_out_the_head_only_sections():
    """Smaller worker scripts: the head's autoscaler config holds one per node type."""
    payload = _payload(render_startup_script(cluster(), "worker", "worker_t"))
    decoded = gzip.decompress(base64.b64decode(payload)).decode()
    assert decoded == library_code("worker")
    for head_only in ("write_bootstrap_files() {", "write_bootstrap_key() {", "watch_config() {"):
        assert head_only not in decoded and head_only in library_code("head")
    # Every node reads Ray's auth token from Secret Manager.
    for shared in ("state_dir() {", "run_node() {", "watch_script() {", "stop_ray() {",
                   "access_secret() (", "write_auth_token() {"):
        assert shared in decoded


def test_comment_lines_inside_a_here_document_are_kept(tmp_path, monkeypatch):
    library = tmp_path / "node_bootstrap.sh"
    library.write_text("# dropped\nf() {\n    # dropped too\n    cat << 'EOF' > out\n"
                       "# kept: data\nEOF\n    # dropped again\n}\n")
    monkeypatch.setattr("bootstrap.startup_script.LIBRARY", library)
    (tmp_path / "empty.sh").write_text("")
    monkeypatch.setattr("bootstrap.startup_script.REAPPLY_LIBRARY", tmp_path / "empty.sh")
    assert library_code() == "f() {\n    cat << 'EOF' > out\n# kept: data\nEOF\n}\n"


def test_rendered_script_is_byte_identical_across_runs():
    """Pulumi compares metadata byte for byte: a second process (another hash seed) renders
    the very same script, so an unchanged cluster shows no diff."""
    render = ("import sys; from bootstrap.startup_script import render_startup_script; "
              "from model.config import load_cluster_config; "
              "c = load_cluster_config(sys.argv[1]); "
              "sys.stdout.write(render_startup_script(c, 'head', c.head_node_type))")
    full = next(s for s in SHIPPED_STACKS if s.stem == "full")
    config = load_cluster_config(full)
    here = render_startup_script(config, "head", config.head_node_type)
    assert render_startup_script(config, "head", config.head_node_type) == here
    other = subprocess.run([sys.executable, "-c", render, str(full)], capture_output=True,
                           text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "12345"},
                           cwd=Path(__file__).resolve().parents[2])
    assert other.stdout == here


def test_node_data_and_steps_stay_plain_text_next_to_the_payload():
    """A preview shows what the node will do: its values single-quoted, its commands in
    order; only the fixed library is compressed."""
    tricky = """record "it's" '$(echo injected)'"""
    config = cluster(setup_commands=[tricky],
                     docker={"image": "rayproject/ray:2.9", "container_name": "rc"})
    script = render_startup_script(config, "worker", "worker_t")
    before_payload = script.split(f"<< '{LIBRARY_DELIMITER}'", 1)[0]
    for line in ("NODE_CLUSTER='stubbed'", "NODE_TYPE='worker_t'", "NODE_SSH_USER='ubuntu'",
                 """RESOURCES_JSON='{"CPU": 4, "custom": 1}'""",
                 "DOCKER_IMAGE='rayproject/ray:2.9'"):
        assert f"\n{line}\n" in before_payload
    steps = _steps(script)
    assert """run_node 'record "it'"'"'s" '"'"'$(echo injected)'"'"''""" in steps
    assert "run_node 'ray start --address=$RAY_HEAD_IP:6379'" in steps
    assert "prepare_node() {" not in script  # the library's code is in the payload only


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
        "if stage initialization", "docker_pull", "docker_start",
        "docker_copy_bootstrap_files", "run_node 'pip install google-api-python-client'",
        "run_node 'ray start --head")]
    assert order == sorted(order)
    assert "DOCKER_IMAGE='rayproject/ray-ml:latest-gpu'" in script
    assert "docker_start '--ulimit' 'nofile=65536:65536'" in steps


def test_stack_without_docker_has_no_docker_steps():
    config = load_cluster_config(next(s for s in SHIPPED_STACKS if s.stem == "minimal"))
    script = render_startup_script(config, "worker", "ray_worker_small")
    assert "docker_" not in _steps(script)
    assert "DOCKER_IMAGE=''" in script


def test_head_and_worker_images_win_over_image():
    config = cluster(docker={"image": "base:1", "head_image": "head:1", "worker_image": "w:1",
                             "container_name": "rc"})
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
        docker={"image": "base:1", "container_name": "rc", "run_options": ["--a"],
                "worker_run_options": ["--w"]},
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
    assert "docker_start '--a' '--own'" in _steps(worker)
    assert "DOCKER_PULL_BEFORE_RUN='false'" in worker
    head = render_startup_script(config, "head", "head_t")
    assert "DOCKER_IMAGE='base:1'" in head
    assert "docker_start '--a'" in _steps(head)
    assert "DOCKER_PULL_BEFORE_RUN='true'" in head
