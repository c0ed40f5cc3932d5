"""`invoke down --workers-only [--keep-min-workers]` and `invoke up --restart-only /
--no-restart`: the requests they make, and one line for each mistake."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime

import pytest
import yaml

from infra.dynamic_types import CLUSTER_SWEEPER_TYPE, LEGACY_TYPE, WORKER_GROUP_TYPE
from infra.workers.provider import WorkerGroupProvider
from infra.workers.sweeper import ClusterSweeperProvider
from model.config import load_cluster_config
from model.labels import KIND_UNMANAGED, NODE_KIND
from ops.errors import OpsError
from ops.lifecycle.down_workers import (
    delete_autoscaler_workers,
    keep_min_workers,
    worker_urns,
)
from ops.lifecycle.reapply import reapply_request
from tests.support.program_runs import PROJECT_ROOT, run_stack
from tests.support.warm_python import run_module

NO_ENGINE = "/nonexistent"  # an engine cache with nothing in it

def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    """Without the pulumi CLI on PATH, as on this machine and a fresh laptop."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin",
           "XDG_CACHE_HOME": NO_ENGINE}  # and no engine `invoke engine` installed
    return run_module(["invoke", *args], cwd=PROJECT_ROOT, env=env, timeout=120)


@pytest.mark.parametrize("stack", ["full", "tpu", "tpu-pod", "tpu-queued"])
def test_worker_urns_are_the_groups_and_kept_slices_not_the_head_or_sweeper(stack):
    """Outputs as the real providers record them: the groups' carry `group_id`; the
    sweeper's and the other dynamic resources' (the key pair) do not. The workers are what
    the program labels as nodes Pulumi keeps for Ray (`unmanaged`); a TPU head is not one."""
    run = run_stack(stack)
    deployment = {"resources": []}
    workers = []
    for resource in run.resources:
        props = resource.inputs
        labels = props.get("labels") or (props.get("body") or {}).get("labels") or {}
        if labels.get(NODE_KIND) == KIND_UNMANAGED:
            workers.append(run.urns[resource.name])
        if resource.type == WORKER_GROUP_TYPE:
            outputs = WorkerGroupProvider()._outputs(props, [], [])
        elif resource.type == CLUSTER_SWEEPER_TYPE:
            # What its state holds (its create also claims the cluster, over the API).
            outputs = ClusterSweeperProvider().update("id", props, props).outs
        else:
            outputs = props
        deployment["resources"].append({"urn": run.urns[resource.name], "type": resource.type,
                                        "outputs": outputs})
    assert workers and len(deployment["resources"]) > len(workers)
    assert sorted(worker_urns(deployment)) == sorted(workers)
    # A stack last updated before the dynamic resources had their own types: the same workers.
    legacy = json.loads(re.sub(r"pulumi-python:dynamic/ray-gcp:\w+", LEGACY_TYPE,
                               json.dumps(deployment)))
    assert sorted(worker_urns(legacy)) == sorted(
        re.sub(r"pulumi-python:dynamic/ray-gcp:\w+", LEGACY_TYPE, urn) for urn in workers)


def test_keep_min_workers_writes_each_types_min_workers(tmp_path):
    stacks = tmp_path / "stacks"
    shutil.copytree(PROJECT_ROOT / "stacks", stacks)
    settings = yaml.safe_load((stacks / "Pulumi.full.yaml").read_text())["config"]
    cluster_file = PROJECT_ROOT / settings["ray-gcp:cluster"]
    counts = keep_min_workers("full", stacks)
    config = load_cluster_config(cluster_file)
    assert counts == {name: t.min_workers for name, t in config.worker_types.items()}
    written = yaml.safe_load((stacks / "Pulumi.full.yaml").read_text())["config"]
    assert written["ray-gcp:workerCounts"] == counts


def test_down_workers_only_without_the_pulumi_cli_is_one_line():
    result = invoke("down", "--stack", "full", "--workers-only")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: the pulumi CLI is not on PATH nor in")


def test_keep_min_workers_alone_never_deletes_the_cluster():
    result = invoke("down", "--stack", "full", "--keep-min-workers")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "--keep-min-workers only goes with --workers-only" in result.stderr


def test_restart_only_and_no_restart_together_are_one_line():
    result = invoke("up", "--stack", "full", "--restart-only", "--no-restart")
    assert result.returncode == 1
    assert result.stderr == ("error: --restart-only and --no-restart are alternatives: "
                             "pick one\n")


def test_each_request_is_stamped_so_a_second_one_is_new():
    first = reapply_request(True, False, datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC))
    second = reapply_request(True, False, datetime(2026, 12, 3, 10, 0, 1, tzinfo=UTC))
    assert first == "restart-only 2026-12-03T10:00:00Z" and second != first
    assert reapply_request(False, True).startswith("no-restart ")
    assert reapply_request(False, False) == ""
    with pytest.raises(OpsError):
        reapply_request(True, True)


def test_workers_only_deletes_the_autoscalers_workers_and_nothing_else(monkeypatch, capsys):
    from tests.fakes.compute import FakeComputeServer

    cluster = {"ray-cluster-name": "c1"}
    with FakeComputeServer() as fake:
        add = fake.cloud.add_foreign_instance
        add("p", "z", "autoscaled", {**cluster, "ray-node-type": "worker"})
        add("p", "z", "grouped", {**cluster, "ray-node-type": "worker", "ray-gcp-group": "g1"})
        add("p", "z", "head", {**cluster, "ray-node-type": "head"})
        add("p", "z", "other", {"ray-cluster-name": "c2", "ray-node-type": "worker"})
        monkeypatch.setenv("RAY_GCP_API_ENDPOINT", fake.endpoint)
        assert delete_autoscaler_workers("p", "z", "c1") == ["autoscaled"]
        assert set(fake.instances("p", "z")) == {"grouped", "head", "other"}
    # said before the wait for the deletion, not only after it
    assert capsys.readouterr().out == "deleting 1 worker(s) of Ray's autoscaler: autoscaled\n"


def test_workers_only_deletes_the_autoscalers_tpu_nodes_not_the_kept_slices(monkeypatch, capsys):
    from tests.fakes.compute import FakeComputeServer

    def slice_(name: str, kind: str, cluster: str = "c1") -> None:
        fake.cloud.create_node("p", "z", name, {
            "acceleratorType": "v2-8", "runtimeVersion": "tpu-vm-base",
            "labels": {"ray-cluster-name": cluster, "ray-node-type": kind}})

    with FakeComputeServer() as fake:
        slice_("autoscaled-tpu", "worker")
        slice_("kept-slice", "unmanaged")
        slice_("tpu-head", "head")
        slice_("other-cluster", "worker", "c2")
        monkeypatch.setenv("RAY_GCP_API_ENDPOINT", fake.endpoint)
        assert delete_autoscaler_workers("p", "z", "c1", "tpu") == ["autoscaled-tpu"]
        fake.cloud.settle()
        assert set(fake.tpu_nodes("p", "z")) == {"kept-slice", "tpu-head", "other-cluster"}
    assert capsys.readouterr().out == \
        "deleting 1 TPU node(s) of Ray's autoscaler: autoscaled-tpu\n"
