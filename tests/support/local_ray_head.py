"""A real local Ray head with its dashboard, for the head daemon's tests (autostop, the spend
cap): on its own ports and temp dir, stopped by its marker, never with `ray stop` (other Ray
clusters may run on this machine); a driver process connected to it; and the daemon's clock,
moved by the test; and running the daemon for a while."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from bootstrap.autostop import Autostop, RayState
from bootstrap.local_cluster import free_port
from bootstrap.local_processes import stop_processes
from tests.fakes.compute import FakeComputeServer
from tests.support.waiting import wait_for

WAIT_S = 60  # an upper bound for a slow machine, not a speed requirement
# `ray start` gives its raylet 30 s to register with the GCS (ray/_private/node.py, not
# configurable); on a loaded machine it can miss that once: the start is tried again.
RAYLET_LATE = "The current node timed out during startup"
START_ATTEMPTS = 3
_wait_for = functools.partial(wait_for, within_s=WAIT_S, poll_s=0.1)


@pytest.fixture(name="ray_head", scope="module")
def ray_head_fixture(tmp_path_factory, ray_processes: str):
    """One Ray head with its dashboard, on its own ports and temp dir; stopped by its marker,
    never with `ray stop` (other Ray clusters may run on this machine)."""
    root = Path(tmp_path_factory.mktemp("rayhead"))
    # short: Ray's socket paths must stay short; one per module that starts a head
    temp_dir = Path(tempfile.mkdtemp(prefix="rga-", dir="/tmp"))
    ports = {name: free_port() for name in ("gcs", "dashboard", "client", "agent", "agent_grpc",
                                            "runtime_env", "metrics", "node_manager", "object")}
    # CI runs pytest under `uv run`: without the switch Ray would start the drivers' workers with
    # `uv run` in an uploaded copy of this checkout instead of in this environment.
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_TMPDIR": str(temp_dir),
           "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    command = [
        ray_processes, "start", "--head", "--node-ip-address=127.0.0.1", "--num-cpus=2",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
        f"--port={ports['gcs']}", f"--dashboard-port={ports['dashboard']}",
        f"--ray-client-server-port={ports['client']}",
        f"--dashboard-agent-listen-port={ports['agent']}",
        f"--dashboard-agent-grpc-port={ports['agent_grpc']}",
        f"--runtime-env-agent-port={ports['runtime_env']}",
        f"--metrics-export-port={ports['metrics']}",
        f"--node-manager-port={ports['node_manager']}",
        f"--object-manager-port={ports['object']}",
    ]
    markers = [str(temp_dir), f"--port={ports['gcs']} ", f"--port={ports['client']} "]
    try:
        for _ in range(START_ATTEMPTS):
            started = subprocess.run(command, env=env, capture_output=True, text=True,
                                     timeout=120)
            if RAYLET_LATE not in started.stderr:
                break
            stop_processes(markers, grace_seconds=3)  # what that start left, before the next
        assert started.returncode == 0, started.stderr[-2000:]
        head = {"address": f"127.0.0.1:{ports['gcs']}", "env": env, "root": root,
                "dashboard": f"http://127.0.0.1:{ports['dashboard']}"}
        _wait_for(lambda: dashboard_answers(head["dashboard"]), "Ray's dashboard answers")
        yield head
    finally:
        # `ray start` exits, leaving its daemons without a parent to follow; Ray's client
        # server names neither the temp dir nor 127.0.0.1 (it binds the machine's address)
        stop_processes(markers, grace_seconds=3)
        shutil.rmtree(temp_dir, ignore_errors=True)


def dashboard_answers(dashboard: str) -> bool:
    try:
        RayState(dashboard).activity()
    except Exception:  # noqa: BLE001 - not up yet
        return False
    return True


def ray_driver(head: dict, code: str) -> subprocess.Popen:
    """A Ray driver process connected to the head, running `code` after `ray.init`."""
    program = ("import ray, sys, time\n"
               f"ray.init(address={head['address']!r}, namespace='autostop')\n{code}")
    return subprocess.Popen([sys.executable, "-c", program], env=head["env"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class Clock:
    """The daemon's clock, moved by the test: windows pass without waiting for them."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def run_for(daemon: Autostop, seconds: float) -> list[str]:
    """The daemon's loop for `seconds` of real time; the nodes it stopped, in order."""
    deadline = time.monotonic() + seconds
    return daemon.run(until=lambda: time.monotonic() > deadline)


def instance_statuses(fake: FakeComputeServer, project: str, zone: str) -> dict[str, str]:
    return {name: i["status"] for name, i in fake.instances(project, zone).items()}
