"""The day-two tasks present Ray's token to a real Ray cluster with token auth (the local
cluster, its head with a dashboard here): `invoke status`'s `ray status` and an `invoke submit`
script's `ray.init()` run on the head with the token the node's startup script wrote; `ray job`
through `invoke dashboard`'s forward, and the head's autostop daemon, present it to the
dashboard. Each is served with the token and refused without it."""

from __future__ import annotations

import getpass
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.autostop import ApiError, RayState
from bootstrap.local_cluster import LocalCluster, free_port, local_up
from bootstrap.node_metadata import RAY_AUTH_TOKEN_FILE
from model.config import load_cluster_config
from ops.cloud.status import status_command
from ops.remote.commands import node_shell, submit_command
from ops.remote.ray_auth import (
    NODE_TOKEN_FILE,
    dashboard_lines,
    local_ray_env,
    with_ray_auth,
    write_local_token,
)
from ops.stacks.stack import StackOutputs
from tests.support.bootstrap_stubs import REPO

LOCAL_YAML = REPO / "stacks" / "clusters" / "local.yaml"
RAY_TIMEOUT_S = 300  # an upper bound for a loaded machine, not a speed requirement


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, ray_processes: str):
    """The local cluster (token auth on), its head also serving the dashboard on 127.0.0.1."""
    text = LOCAL_YAML.read_text()
    dashboard = (f"--include-dashboard=true --dashboard-host=127.0.0.1 "
                 f"--dashboard-agent-listen-port={free_port()} "
                 f"--dashboard-agent-grpc-port={free_port()}")
    assert "--include-dashboard=false" in text
    config_file = tmp_path_factory.mktemp("config") / "local.yaml"
    config_file.write_text(text.replace("--include-dashboard=false", dashboard))
    started = local_up(load_cluster_config(config_file))
    try:
        yield started
    finally:
        started.down()


def outputs(cluster: LocalCluster, token: str) -> StackOutputs:
    """The stack's outputs as the tasks read them; `token` "" for a stack without token auth."""
    return StackOutputs(stack="local", cluster_name="local", head_name="head",
                        head_internal_ip=cluster.node_ip, head_external_ip=None,
                        ssh_user=getpass.getuser(), ssh_port=22, ssh_private_key="unused",
                        ray_auth_token=token)


def token_of(cluster: LocalCluster) -> str:
    return cluster.auth_token_path.read_text()


def on_the_head(cluster: LocalCluster, home: Path, command: str) -> subprocess.CompletedProcess:
    """`command` as the tasks send it over SSH, run as a login on the head would: HOME is the
    node user's (the startup script wrote the token there, or did not), no Ray auth in the
    environment, the cluster's address in RAY_ADDRESS."""
    env = {k: v for k, v in cluster.ray_env().items() if not k.startswith("RAY_AUTH_")}
    env.update(HOME=str(home), RAY_ADDRESS=cluster.address)
    return subprocess.run(["sh", "-c", node_shell(command)], env=env, cwd=home,
                          capture_output=True, text=True, timeout=RAY_TIMEOUT_S)


def node_home(root: Path, token: str | None) -> Path:
    """A node user's home; with `token`, holding it where the startup script writes it."""
    root.mkdir()
    if token is not None:
        (root / ".ray").mkdir()
        (root / NODE_TOKEN_FILE).write_text(token)
        (root / NODE_TOKEN_FILE).chmod(0o600)
    return root


def test_the_tasks_and_the_startup_script_agree_on_the_token_file():
    assert NODE_TOKEN_FILE == RAY_AUTH_TOKEN_FILE


def test_a_stack_without_token_auth_sends_commands_unchanged(cluster):
    assert with_ray_auth("ray status", outputs(cluster, "")) == "ray status"


def test_status_is_served_with_the_token_and_refused_without(cluster, tmp_path):
    home = node_home(tmp_path / "home", token_of(cluster))
    served = on_the_head(cluster, home, status_command(outputs(cluster, token_of(cluster))))
    assert served.returncode == 0, served.stderr[-2000:]
    assert "Active:" in served.stdout
    bare = node_home(tmp_path / "bare", None)
    refused = on_the_head(cluster, bare, status_command(outputs(cluster, "")))
    assert refused.returncode != 0
    assert "auth" in (refused.stdout + refused.stderr).lower()


def test_a_submitted_script_connects_with_the_token_and_is_refused_without(cluster, tmp_path):
    script = "import ray\nray.init()\nprint('cpus', ray.cluster_resources().get('CPU'))\n"
    home = node_home(tmp_path / "home", token_of(cluster))
    (home / "job.py").write_text(script)
    served = on_the_head(cluster, home,
                         submit_command(outputs(cluster, token_of(cluster)), "job.py", []))
    assert served.returncode == 0, served.stderr[-2000:]
    assert "cpus " in served.stdout
    bare = node_home(tmp_path / "bare", None)
    (bare / "job.py").write_text(script)
    refused = on_the_head(cluster, bare, submit_command(outputs(cluster, ""), "job.py", []))
    assert refused.returncode != 0


def ray_job_list(cluster: LocalCluster, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`ray job list` here against the head's dashboard, as through the dashboard's forward."""
    base = {k: v for k, v in cluster.ray_env().items() if not k.startswith("RAY_AUTH_")}
    ray = str(Path(sys.executable).parent / "ray")
    return subprocess.run(
        [ray, "job", "list", "--address", f"http://127.0.0.1:{cluster.dashboard_port}"],
        env={**base, **env}, capture_output=True, text=True, timeout=RAY_TIMEOUT_S)


def test_jobs_through_the_dashboard_forward_are_served_with_the_local_token_file(
    cluster, tmp_path
):
    token_file = write_local_token(outputs(cluster, token_of(cluster)), tmp_path)
    assert token_file is not None
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    served = ray_job_list(cluster, local_ray_env(token_file))
    assert served.returncode == 0, served.stderr[-2000:]
    refused = ray_job_list(cluster, {})
    assert refused.returncode != 0


def test_dashboard_instructions_name_the_token_file_and_show_the_token_only_when_asked(
    cluster, tmp_path
):
    token = token_of(cluster)
    token_file = write_local_token(outputs(cluster, token), tmp_path)
    quiet = "\n".join(dashboard_lines("http://127.0.0.1:8265", token_file))
    assert token not in quiet
    assert str(token_file) in quiet and "RAY_AUTH_MODE=token" in quiet
    shown = "\n".join(dashboard_lines("http://127.0.0.1:8265", token_file, token))
    assert f"token: {token}" in shown
    assert write_local_token(outputs(cluster, "")) is None


def test_the_autostop_daemon_reads_ray_through_the_dashboard_with_the_token(cluster, tmp_path):
    url = f"http://127.0.0.1:{cluster.dashboard_port}"
    copy = tmp_path / "auth_token"
    shutil.copy(cluster.auth_token_path, copy)
    RayState(url, str(copy)).activity()  # served: no ApiError
    with pytest.raises(ApiError, match="HTTP 401"):
        RayState(url).activity()
