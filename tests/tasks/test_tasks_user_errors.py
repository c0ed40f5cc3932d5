"""What users type gets one clear line for their mistakes, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import yaml

from tests.support.program_runs import PROJECT_ROOT, stack_yaml
from tests.support.warm_python import run_module

NO_ENGINE = "/nonexistent"  # an engine cache with nothing in it

def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin",
           "XDG_CACHE_HOME": NO_ENGINE}  # and no engine `invoke engine` installed
    return run_module(["invoke", *args], cwd=PROJECT_ROOT, env=env, timeout=120)


def test_local_up_with_a_bad_cluster_yaml_names_the_path_and_the_fix(tmp_path):
    raw = stack_yaml("full")
    raw["available_node_types"]["ray_worker_small"]["min_workers"] = 5
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    result = invoke("local-up", "--config", str(bad))
    assert result.returncode == 1
    assert "available_node_types.ray_worker_small.min_workers" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_plan_of_an_unknown_stack_lists_the_known_ones():
    result = invoke("plan", "--stack", "no-such-stack")
    assert result.returncode == 1
    assert "no stack 'no-such-stack'" in result.stderr and "full" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_up_without_the_pulumi_cli_says_so_in_one_line():
    result = invoke("up", "--stack", "full")
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "pulumi CLI" in lines[0] and "install" in lines[0]
