"""End to end: the rendered head and worker scripts start a real two-node Ray cluster here,
it runs a task on each node, and teardown leaves none of its processes behind."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.local_cluster import (
    LocalCluster,
    count_active_nodes,
    load_states,
    local_down,
    local_up,
    read_status,
)
from bootstrap.local_processes import any_alive, processes_matching
from model.config import load_cluster_config
from tests.support.bootstrap_stubs import REPO

LOCAL_YAML = REPO / "stacks" / "clusters" / "local.yaml"


@pytest.fixture(scope="module")
def config():
    return load_cluster_config(LOCAL_YAML)


@pytest.fixture(scope="module")
def started(config, ray_processes):
    """One local cluster shared by the assertions below (Ray starts are slow)."""
    cluster = local_up(config)
    try:
        yield cluster, cluster.run_program()
    finally:
        cluster.down()


@pytest.mark.slow  # starts the module's two-node cluster: 47-51 s on a loaded 2-core machine
def test_both_nodes_finish_their_startup_scripts(started, config):
    cluster, _ = started
    head = cluster.node("head", config.head_node_type)
    worker = cluster.node("worker", "local_worker")
    assert read_status(head) == "ready"
    assert read_status(worker) == "ready"
    assert (head.home / "ray_bootstrap_config.yaml").is_file()
    assert "stage=ray-start begin" in worker.log_file.read_text()


def test_a_mounted_folder_is_read_by_a_setup_command_on_both_nodes(started, config):
    """local.yaml mounts stacks/clusters/local_files at ~/cluster_files; its first setup
    command greps it (a miss would fail the node): each node unpacked it before setup."""
    cluster, _ = started
    for node in (cluster.node("head", config.head_node_type),
                 cluster.node("worker", "local_worker")):
        mounted = node.home / "cluster_files" / "README.txt"
        assert mounted.read_text() == (REPO / "stacks/clusters/local_files/README.txt").read_text()
        log = node.log_file.read_text()
        assert log.index("file mount ~/cluster_files") < log.index(
            "+ grep -q \"mounted on every node\" ~/cluster_files/README.txt")
        assert read_status(node) == "ready"


def test_two_alive_nodes_carry_the_resources_declared_for_their_types(started, config):
    cluster, report = started
    assert cluster.active_nodes() == 2
    declared = sorted(
        (config.available_node_types[name].resources for name in ("local_head", "local_worker")),
        key=lambda r: sorted(r),
    )
    actual = sorted(
        ({k: node["resources"][k] for k in d} for d in declared for node in report["nodes"]
         if set(d) <= set(node["resources"]) and set(node["resources"]) & (set(d) - {"CPU"})),
        key=lambda r: sorted(r),
    )
    assert len(report["nodes"]) == 2
    assert actual == declared


def test_a_remote_task_runs_on_each_node(started):
    _, report = started
    node_ids = {node["node_id"] for node in report["nodes"]}
    assert len(node_ids) == 2
    assert report["task_ran_on"] == {node_id: node_id for node_id in node_ids}


@pytest.mark.usefixtures("ray_processes")
@pytest.mark.slow  # over 60 s on the loaded 2-core machine
def test_two_kept_clusters_and_one_local_down_leave_no_process_of_either(
    config, tmp_path, monkeypatch
):
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path))  # only this test's records
    clusters = []
    try:
        clusters += [local_up(config), local_up(config)]  # what two `local-up --keep` leave
        running = [processes_matching(cluster.markers()) for cluster in clusters]
        for cluster, pids in zip(clusters, running, strict=True):
            watcher = int((cluster.root / "head" / "state" / "config-watcher.pid").read_text())
            assert watcher in pids  # the head's config watcher goes down with its cluster
        assert load_states() == clusters

        assert local_down() is True

        for cluster, pids in zip(clusters, running, strict=True):
            assert not any_alive(pids)
            assert processes_matching(cluster.markers()) == set()
            assert not cluster.root.exists()
        assert load_states() == []
    finally:
        for cluster in clusters:
            cluster.down()


@pytest.mark.usefixtures("ray_processes")  # its nodes' scripts run (and fail before Ray starts)
def test_failed_start_is_torn_down_and_reports_the_stage(config, tmp_path):
    broken = config.model_copy(update={"setup_commands": ["exit 5"]})
    root = tmp_path / "broken"
    with pytest.raises(RuntimeError, match="failed:setup:5"):
        local_up(broken, root=root)
    assert processes_matching([str(root)]) == set()


def test_ray_status_active_nodes_are_counted():
    output = (
        "Node status\n----\nActive:\n 1 node_a\n 2 node_b\nPending:\n (no pending nodes)\n"
    )
    assert count_active_nodes(output) == 3
    assert count_active_nodes("Active:\n (no active nodes)\nPending:\n") == 0



def test_ray_status_of_autoscaler_v2_counts_idle_nodes_as_up():
    """v2's formatter (Ray's ClusterStatusFormatter) puts nodes doing nothing under `Idle:`."""
    output = ("Node status\n----\nActive:\n (no active nodes)\nIdle:\n 1 local_head\n"
              " 1 local_worker\nPending:\n (no pending nodes)\n")
    assert count_active_nodes(output) == 2


def test_cluster_directory_is_short_enough_for_rays_sockets():
    cluster = LocalCluster.create()
    try:
        assert len(str(cluster.ray_tmpdir)) < 40
    finally:
        cluster.down()


def test_local_down_forgets_a_gone_cluster_without_stopping_a_process_on_its_port(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path))
    gone = LocalCluster(tmp_path / "removed-root", "127.0.0.9", 6, 7, 8)
    gone.save_state()
    # Another cluster that reuses the gone one's address: its command line names it too.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                              f"--address={gone.address}"])
    try:
        local_down()
        assert other.poll() is None
        assert load_states() == []
    finally:
        other.kill()
        other.wait()



def test_the_local_cluster_refuses_a_client_without_its_token_and_serves_one_with_it(started):
    """Ray's GCS checks the token of every call: `ray status` from the project's environment
    with the cluster's token is served; without it, or with another token, it is refused."""
    cluster, _ = started
    assert stat.S_IMODE(cluster.auth_token_path.stat().st_mode) == 0o600
    ray = str(Path(sys.executable).parent / "ray")
    status = [ray, "status", "--address", cluster.address]
    with_token = cluster.ray_env()
    served = subprocess.run(status, env=with_token, capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr
    without = {k: v for k, v in with_token.items() if not k.startswith("RAY_AUTH_")}
    refused = subprocess.run(status, env=without, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0
    assert "auth" in (refused.stdout + refused.stderr).lower()
    other = tmp_token(cluster.root / "other_token")
    wrong = {**with_token, "RAY_AUTH_TOKEN_PATH": str(other)}
    forbidden = subprocess.run(status, env=wrong, capture_output=True, text=True, timeout=300)
    assert forbidden.returncode != 0


def tmp_token(path: Path) -> Path:
    path.write_text("0" * 64)
    return path
