"""Re-apply on a running node: the node runs the rendered script of version 1, is handed
version 2 through the metadata its watcher reads, and converges: changed stages rerun once,
unchanged ones do not, Ray restarts with the new start command; restart-only / no-restart
behave as named; a failing rerun is reported and leaves Ray running."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bootstrap.node_metadata import VERSION_KEY, node_metadata
from bootstrap.startup_script import script_version
from tests.support.bootstrap_stubs import (
    cluster,
    gce_env,
    grant_head_reader,
    granted_node,
    node_entries,
    node_watcher_pid_file,
    run_script,
    stop_watchers,
)
from tests.support.waiting import wait_for

HEAD_ADDRESS = {"ray-head-address": "10.0.0.9"}
V1_START = "ray start --address=10.0.0.9:6379"
V2_START = "ray start --address=10.0.0.9:6379 --num-gpus=0"


class Node:
    """A worker booted from version 1 with its node watcher left running."""

    def __init__(self, tmp_path: Path, role: str = "worker", node_type: str = "worker_t",
                 **config):
        self.tmp_path, self.role, self.node_type = tmp_path, role, node_type
        self.config = config
        self.head_status = tmp_path / "head-guest-attributes" / "ray-bootstrap"
        self.head_status.mkdir(parents=True)
        (self.head_status / "status").write_text("ready")
        (self.head_status / "ray-started").write_text("aaaa 2026-12-03T10:00:00Z 1")
        entries = node_entries(cluster(**config), role, node_type, tmp_path)
        self.env = {"RAY_BOOTSTRAP_WATCH_INTERVAL": "0.1",
                    "RAY_BOOTSTRAP_HEAD_STATUS_DIR": str(self.head_status.parent),
                    "RAY_BOOTSTRAP_HEAD_WAIT_DELAY": "0.1"}
        if role == "head":
            self.env["RAY_HEAD_IP"] = "10.0.0.9"
        self.boot = run_script(entries.pop("startup-script"), tmp_path,
                               {**entries, **HEAD_ADDRESS}, self.env, keep_watcher=True)
        assert self.boot.returncode == 0, self.boot.log
        self.v1 = entries[VERSION_KEY]

    def calls(self) -> list[str]:
        return [c for c in (self.tmp_path / "calls").read_text().splitlines()
                if not c.startswith("ray-env")]

    def attribute(self, name: str) -> str:
        path = self.tmp_path / "guest-attributes" / "ray-bootstrap" / name
        return path.read_text() if path.exists() else ""

    def hand(self, request: str = "", **overrides) -> str:
        """Publish the script of `cluster(**overrides)` as the metadata server would: the
        script first, then the version key the watcher follows. Returns its version."""
        entries = node_entries(cluster(**{**self.config, **overrides}), self.role,
                               self.node_type, self.tmp_path, request=request)
        metadata = self.tmp_path / "metadata"
        for key in ("startup-script", VERSION_KEY):
            staged = metadata / f".{key}.new"
            staged.write_text(entries[key])
            staged.rename(metadata / key)
        return script_version(entries["startup-script"])

    def wait_applied(self, version: str) -> None:
        wait_for(lambda: self.attribute("version") == version
                 and self.attribute("status") == "ready", f"version {version} applied")

    def wait_log(self, text: str) -> None:
        wait_for(lambda: text in (self.tmp_path / "bootstrap.log").read_text(),
                 f"log line {text!r}")

    def boot_log(self) -> str:
        return (self.tmp_path / "bootstrap.log").read_text()

    def new_calls(self, before: int) -> list[str]:
        return self.calls()[before:]


@pytest.fixture
def worker(tmp_path):
    node = Node(tmp_path)
    yield node
    stop_watchers(tmp_path)


def test_changed_setup_and_start_rerun_once_and_ray_restarts_with_the_new_command(worker):
    before = len(worker.calls())
    version = worker.hand(setup_commands=["record setup-common-v2"],
                          worker_start_ray_commands=[V2_START.replace("10.0.0.9", "$RAY_HEAD_IP")])
    worker.wait_applied(version)
    assert worker.new_calls(before) == [
        "record setup-common-v2", "record setup-worker", "ray stop", V2_START]
    assert "re-apply: stage initialization unchanged: skipped" in worker.boot_log()


def test_unchanged_stages_do_not_rerun_and_ray_keeps_running_when_nothing_it_runs_changed(
    worker,
):
    before = len(worker.calls())
    version = worker.hand(initialization_commands=["record init-2"])
    worker.wait_applied(version)
    # initialization changed, so Ray restarts: it may depend on what the host has.
    assert worker.new_calls(before) == ["record init-2", "ray stop", V1_START]
    again = len(worker.calls())
    same = worker.hand(initialization_commands=["record init-2"], request="")
    assert same == version
    worker.wait_log(f"node watcher pid={_pid(worker)} runs version {version}")
    assert worker.new_calls(again) == []


def test_changed_file_mounts_are_fetched_again_in_place_and_setup_does_not_rerun(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "version").write_text("1")
    node = Node(tmp_path, file_mounts={"~/data": "data"})
    try:
        assert (node.boot.home / "data" / "version").read_text() == "1"
        (tmp_path / "data" / "version").write_text("2")
        before = len(node.calls())
        version = node.hand(file_mounts={"~/data": "data"})
        node.wait_applied(version)
        assert (node.boot.home / "data" / "version").read_text() == "2"
        assert not [call for call in node.new_calls(before) if call.startswith("record setup")]
        assert node.boot_log().count("file mount ~/data <- archive member 0") == 2
    finally:
        stop_watchers(tmp_path)


def test_new_resources_restart_ray_with_them_and_rerun_nothing_else(worker):
    types = {
        "head_t": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
        "worker_t": {"resources": {"CPU": 8}, "min_workers": 1,
                     "node_config": {"machineType": "n1-standard-2"}},
    }
    before = len(worker.calls())
    version = worker.hand(available_node_types=types)
    worker.wait_applied(version)
    assert worker.new_calls(before) == ["ray stop", V1_START]
    raw = (worker.tmp_path / "calls").read_text().splitlines()
    assert raw[-1] == 'ray-env HEAD=10.0.0.9 RES={"CPU": 8}'


def test_restart_only_restarts_ray_without_rerunning_setup(worker):
    before = len(worker.calls())
    version = worker.hand(request="restart-only 2026-12-03T10:00:00Z",
                          setup_commands=["record setup-common-v2"])
    worker.wait_applied(version)
    assert worker.new_calls(before) == ["ray stop", V1_START]


def test_restart_only_with_an_unchanged_script_still_restarts_ray(worker):
    before = len(worker.calls())
    worker.hand(request="restart-only 2026-12-03T10:00:00Z")
    worker.wait_log("re-applying version")
    worker.wait_applied(script_version((worker.tmp_path / "metadata" / "startup-script")
                                       .read_text()))
    wait_for(lambda: worker.new_calls(before) == ["ray stop", V1_START], "Ray restarted")


def test_no_restart_applies_setup_without_restarting_ray(worker):
    before = len(worker.calls())
    version = worker.hand(request="no-restart 2026-12-03T10:00:00Z",
                          setup_commands=["record setup-common-v2"])
    worker.wait_applied(version)
    assert worker.new_calls(before) == ["record setup-common-v2", "record setup-worker"]
    assert "re-apply (no-restart): Ray keeps running as it was" in worker.boot_log()


def test_failing_rerun_is_reported_with_its_stage_and_leaves_ray_running(worker):
    before = len(worker.calls())
    version = worker.hand(setup_commands=["record setup-v2", "exit 9"])
    wait_for(lambda: worker.attribute("status") == "failed:setup:9", "failure reported")
    worker.wait_log(f"re-apply of version {version} failed")
    assert worker.new_calls(before) == ["record setup-v2"]  # no `ray stop`: Ray runs on
    assert worker.attribute("version") == script_version(
        (worker.tmp_path / "state" / "node-script.sh").read_text())
    assert worker.attribute("version") != version
    # The next change is tried again, and converges.
    fixed = worker.hand(setup_commands=["record setup-v3"])
    worker.wait_applied(fixed)
    assert worker.new_calls(before)[1:] == ["record setup-v3", "record setup-worker",
                                            "ray stop", V1_START]


def test_a_new_image_replaces_the_container_then_reruns_setup_and_ray_in_it(tmp_path):
    docker = {"image": "rayproject/ray:2.9", "container_name": "rc"}
    node = Node(tmp_path, docker=docker)
    try:
        before = len(node.calls())
        version = node.hand(docker={**docker, "image": "rayproject/ray:2.10"})
        node.wait_applied(version)
        # (The Ray auth token's `docker cp` into the new container is left out too.)
        calls = [c for c in node.new_calls(before)
                 if not c.startswith(("docker inspect", "docker image", "docker exec",
                                      "docker cp"))]
        run = next(c for c in calls if c.startswith("docker run"))
        assert run.endswith("rayproject/ray:2.10 bash")
        # Setup did not change, but the new container has not run it: it reruns there.
        assert calls == ["docker pull rayproject/ray:2.10", "docker rm -f rc", "docker rm -f rc",
                         run, "record setup-common", "record setup-worker", "ray stop",
                         V1_START]
        assert "record init-1" not in calls
    finally:
        stop_watchers(tmp_path)


def test_no_restart_keeps_the_running_container(tmp_path):
    docker = {"image": "rayproject/ray:2.9", "container_name": "rc"}
    node = Node(tmp_path, docker=docker)
    try:
        before = len(node.calls())
        version = node.hand(request="no-restart 2026-12-03T10:00:00Z",
                            docker={**docker, "image": "rayproject/ray:2.10"})
        node.wait_applied(version)
        # Ray's auth token is copied into the container again, as on every boot and re-apply.
        copy = ("docker image inspect ", "docker exec rc id ", "docker cp ",
                "docker exec -u 0 rc ")
        calls = [c for c in node.new_calls(before) if not c.startswith(copy)]
        assert calls == ["docker pull rayproject/ray:2.10"]  # no `docker rm`, no `ray stop`
        assert "they apply with the next restart" in node.boot_log()
    finally:
        stop_watchers(tmp_path)


def test_worker_restarts_its_ray_after_the_head_restarted_its_own(worker):
    before = len(worker.calls())
    (worker.head_status / "ray-started").write_text("bbbb 2026-12-03T10:05:00Z 2")
    wait_for(lambda: worker.new_calls(before) == ["ray stop", V1_START],
             "Ray restarted after the head")
    assert "the head restarted Ray (bbbb" in worker.boot_log()


def test_head_reapply_restarts_ray_and_tells_workers(tmp_path):
    head = Node(tmp_path, role="head", node_type="head_t")
    try:
        first = head.attribute("ray-started")
        before = len(head.calls())
        version = head.hand(head_start_ray_commands=["ray start --head --port=6380"])
        head.wait_applied(version)
        assert head.new_calls(before) == ["ray stop", "ray start --head --port=6380"]
        assert head.attribute("ray-started").startswith(version)
        assert head.attribute("ray-started") != first
    finally:
        stop_watchers(tmp_path)


def _pid(node: Node) -> int:
    return int(node_watcher_pid_file(node.tmp_path).read_text())


HEAD_NAME = "ray-stubbed-head-1a2b3c4d-compute"


def test_on_gce_the_watcher_long_polls_its_version_and_follows_the_head_through_compute(
    tmp_path,
):
    """No metadata dir: the metadata server (ETag long polls) and the Compute API's
    getGuestAttributes (the head's attributes, with the node's token), as on GCE."""
    config = cluster(auth={"ssh_user": "root"})  # root: no user is created on this machine
    entries = node_metadata(config, "worker", "worker_t")
    script = tmp_path / "startup-script"
    script.write_text(entries["startup-script"])
    calls = tmp_path / "calls"
    head = {"ray-bootstrap/status": "ready", "ray-bootstrap/ray-started": "aaaa t0 1"}
    with granted_node(attributes={**entries, "ray-head-address": HEAD_NAME},
                      guest_attributes={HEAD_NAME: head}) as fake:
        grant_head_reader(fake, HEAD_NAME)
        env = gce_env(tmp_path, fake, HEAD_NAME)
        try:
            boot = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True,
                                  timeout=60)
            log = tmp_path / "bootstrap.log"
            assert boot.returncode == 0, log.read_text()
            wait_for(lambda: any("ray-bootstrap-version?wait_for_change=true" in r
                                  for r in fake.requests), "a long poll of the version")
            before = len(calls.read_text().splitlines())
            v2 = node_metadata(cluster(auth={"ssh_user": "root"},
                                       worker_setup_commands=["record setup-worker-v2"]),
                               "worker", "worker_t")
            fake.set_attribute("startup-script", v2["startup-script"])
            fake.set_attribute(VERSION_KEY, v2[VERSION_KEY])
            version = (tmp_path / "guest-attributes" / "ray-bootstrap" / "version")
            wait_for(lambda: version.read_text() == v2[VERSION_KEY], "version 2 applied")
            applied = [c for c in calls.read_text().splitlines()[before:]
                       if not c.startswith(("ray-env", "getent"))]
            assert applied == ["record setup-common", "record setup-worker-v2", "ray stop",
                               "ray start --address=10.128.0.7:6379"]
            # The head restarts its Ray: the worker sees it through the Compute API.
            before = len(calls.read_text().splitlines())
            head["ray-bootstrap/ray-started"] = "bbbb t1 2"
            wait_for(lambda: "ray start --address=10.128.0.7:6379"
                     in calls.read_text().splitlines()[before:], "Ray restarted after the head")
            assert "the head restarted Ray (bbbb t1 2)" in log.read_text()
        finally:
            stop_watchers(tmp_path)
    guest_reads = [r for r in fake.requests if "getGuestAttributes" in r]
    assert (f"/compute/v1/projects/my-gcp-project/zones/us-west1-a/instances/{HEAD_NAME}/"
            "getGuestAttributes?variableKey=ray-bootstrap/ray-started") in guest_reads
