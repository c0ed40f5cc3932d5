"""The head's node provider in Ray's own autoscaler process: a real `ray start --head
--autoscaling-config` with the environment the head's startup script gave `ray start`, for
each of Ray's autoscalers. Its monitor (v1's `monitor.py`, v2's `v2/monitor.py`) must build
the provider from the zip the script installed, as Ray's `type: external` loader does."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from bootstrap.autoscaler_config import autoscaler_config
from bootstrap.head_provider_metadata import ARCHIVE_NAME, SHIPPED_PACKAGE
from bootstrap.local_cluster import free_port
from bootstrap.local_processes import stop_processes
from tests.support.bootstrap_stubs import cluster, node_entries, run_script
from tests.support.waiting import wait_for

# What the head's script puts in `ray start`'s environment for the autoscaler.
START_ENV = ("PYTHONPATH", "RAY_enable_autoscaler_v2", "RAY_CLOUD_INSTANCE_ID",
             "RAY_NODE_TYPE_NAME")
WAIT_S = 120  # an upper bound for a slow machine, not a speed requirement


def monitor_log(temp_dir: Path) -> str:
    return "".join(path.read_text(errors="replace")
                   for path in sorted(temp_dir.glob("session_*/logs/monitor*")))


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_rays_monitor_builds_the_head_provider_from_the_installed_zip(ray_processes, tmp_path,
                                                                     version):
    provider = {"type": "gcp", "region": "us-west1", "availability_zone": "us-west1-a",
                "project_id": "my-gcp-project", "autoscaler_version": version}
    config = cluster(provider=provider)
    entries = node_entries(config, "head", "head_t", tmp_path)
    run = run_script(entries.pop("startup-script"), tmp_path, entries,
                     env={"RAY_HEAD_IP": "10.0.0.2"})
    assert run.returncode == 0 and run.status == "ready", run.log
    bodies = {name: t.node_config.body() for name, t in config.available_node_types.items()}
    autoscaling = autoscaler_config(config, bodies)
    # A token, so Ray's GCP clients are built without looking for credentials on the machine
    # (no metadata server here); nothing is asked of Google in this test.
    autoscaling["provider"]["gcp_credentials"] = {"type": "credentials_token",
                                                  "credentials": "not-a-real-token"}
    config_file = tmp_path / "ray_bootstrap_config.yaml"
    config_file.write_text(yaml.safe_dump(autoscaling))

    temp_dir = Path(tempfile.mkdtemp(prefix="rhp-", dir="/tmp"))  # Ray's socket paths: short
    port = free_port()
    env = {**os.environ, **{key: run.ray_env[key] for key in START_ENV if key in run.ray_env},
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    try:
        started = subprocess.run(
            [ray_processes, "start", "--head", "--node-ip-address=127.0.0.1",
             f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
             "--disable-usage-stats", f"--temp-dir={temp_dir}",
             f"--autoscaling-config={config_file}"],
            env=env, capture_output=True, text=True, timeout=WAIT_S)
        assert started.returncode == 0, started.stderr[-2000:]
        built = (f"HeadNodeProvider from {run.home / ARCHIVE_NAME}/{SHIPPED_PACKAGE}/"
                 "provider.py")
        wait_for(lambda: built in monitor_log(temp_dir), f"{version}'s monitor built the provider",
                 within_s=WAIT_S, poll_s=0.5)
        assert "ModuleNotFoundError" not in monitor_log(temp_dir)
    finally:
        stop_processes([str(temp_dir), f"--port={port} "], grace_seconds=3)
        shutil.rmtree(temp_dir, ignore_errors=True)
