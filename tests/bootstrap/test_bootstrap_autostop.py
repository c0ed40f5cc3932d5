"""The head's autostop daemon against a real Ray head (its dashboard's state and job APIs)
and the fake Compute/TPU API: an idle cluster is stopped, workers first; a task, a job or an
actor keeps it up; a job during the window restarts the countdown; cancelling stops it."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from bootstrap.autostop import (
    OVERRIDE_FILE,
    Autostop,
    Cloud,
    Metadata,
    RayState,
    Stop,
    read_settings,
    ssh_sessions,
    stop_cluster,
)
from bootstrap.autostop_metadata import autostop_settings
from bootstrap.local_cluster import free_port
from model.config import parse_cluster_config
from model.labels import ray_labels
from ops.cloud.autostop import override_text
from tests.fakes.compute import FakeComputeServer
from tests.support.local_ray_head import (
    WAIT_S,
    Clock,
    _wait_for,
    instance_statuses,
    ray_driver,
    run_for,
)
from tests.support.program_grants import local_metadata_token, programs_head

PROJECT, ZONE, CLUSTER = "my-proj", "us-west1-a", "idle"
WINDOW_S = 2.0  # the idle window of these tests
POLL_S = 0.25
CONFIG_DATA = {
    "cluster_name": CLUSTER,
    "provider": {"type": "gcp", "region": "us-west1", "availability_zone": ZONE,
                 "project_id": PROJECT, "autostop": {"idle_minutes": 10}},
    "available_node_types": {
        "head": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
        "cpu": {"resources": {"CPU": 2}, "min_workers": 2, "max_workers": 2,
                "node_config": {"machineType": "n1-standard-2"}},
    },
    "head_node_type": "head",
}
CONFIG = parse_cluster_config(copy.deepcopy(CONFIG_DATA))


@pytest.fixture
def fake():
    with FakeComputeServer() as server:
        for role, node_type, name in (("head", "head", "ray-idle-head-1"),
                                      ("worker", "cpu", "ray-idle-worker-1"),
                                      ("worker", "cpu", "ray-idle-worker-2")):
            server.cloud.add_foreign_instance(PROJECT, ZONE, name,
                                              ray_labels(CLUSTER, role, node_type))
        server.cloud.add_foreign_instance(PROJECT, ZONE, "someone-else",
                                          ray_labels("other", "worker", "cpu"))
        yield server


def _daemon(ray_head: dict, fake: FakeComputeServer, tmp_path: Path, clock=time.time,
            **settings) -> Autostop:
    """The daemon as the head runs it: settings from metadata (as the program writes them,
    with a window of WINDOW_S), Ray's APIs on the test head, the fake as Compute/TPU API."""
    metadata_dir, home, proc = tmp_path / "metadata", tmp_path / "home", tmp_path / "proc"
    for directory in (metadata_dir, home, proc):  # proc: no SSH session (see the SSH tests)
        directory.mkdir()
    values = {**autostop_settings(CONFIG), "idle_minutes": WINDOW_S / 60, **settings}
    (metadata_dir / "ray-autostop").write_text(json.dumps(values))
    head = programs_head(fake, PROJECT, tpu=bool(values.get("tpu")))
    local_metadata_token(metadata_dir, fake.vm_token(**head))
    metadata = Metadata(str(metadata_dir))
    cloud = Cloud(metadata, f"http://{fake.endpoint}/compute/v1", f"http://{fake.endpoint}/v2")
    return Autostop(metadata, home, RayState(ray_head["dashboard"]), cloud, proc, POLL_S, clock)


def _stays_up_past_the_window(daemon: Autostop, clock: Clock) -> bool:
    """Two checks a whole window apart: busy at both, so no decision to stop."""
    first = daemon.check()
    clock.now += WINDOW_S + 1
    return first is None and daemon.check() is None and daemon.idle_since is None


def _statuses(fake: FakeComputeServer) -> dict[str, str]:
    return instance_statuses(fake, PROJECT, ZONE)


def _operations(fake: FakeComputeServer, kind: str) -> list[str]:
    """Targets of the fake's operations of one kind, in the order they were asked for."""
    return [op.target.rsplit("/", 1)[-1] for _, op in sorted(fake.cloud.operations.items())
            if op.operation_type == kind]


def test_an_idle_cluster_stops_every_node_workers_first(ray_head, fake, tmp_path):
    daemon = _daemon(ray_head, fake, tmp_path)
    stopped = run_for(daemon, WAIT_S)
    assert stopped[-1] == "ray-idle-head-1"
    assert sorted(stopped[:-1]) == ["ray-idle-worker-1", "ray-idle-worker-2"]
    assert _operations(fake, "stop") == stopped  # the head was asked for after the workers
    assert _statuses(fake) == {"ray-idle-head-1": "TERMINATED",
                               "ray-idle-worker-1": "TERMINATED",
                               "ray-idle-worker-2": "TERMINATED", "someone-else": "RUNNING"}
    head = fake.instances(PROJECT, ZONE)["ray-idle-head-1"]
    assert head["labels"]["ray-autostop"] == "stopped"
    assert head["labels"]["ray-autostop-at"].endswith("z")
    status = (tmp_path / "guest-attributes" / "ray-bootstrap" / "status").read_text()
    assert status.startswith("autostopped:") and ":stopped:" in status


def test_a_worker_failed_over_to_another_zone_is_stopped_in_its_zone(fake, tmp_path):
    """A worker group's zone failover puts workers outside the head's zone: they are the
    cluster's too (its labels), and are stopped where they are."""
    other_zone = "us-west1-b"
    fake.cloud.add_foreign_instance(PROJECT, other_zone, "ray-idle-worker-3",
                                    ray_labels(CLUSTER, "worker", "cpu"))
    fake.cloud.add_foreign_instance(PROJECT, other_zone, "elsewhere",
                                    ray_labels("other", "worker", "cpu"))
    metadata_dir = tmp_path / "metadata"
    metadata_dir.mkdir()
    (metadata_dir / "ray-autostop").write_text(json.dumps(autostop_settings(CONFIG)))
    local_metadata_token(metadata_dir, fake.vm_token(**programs_head(fake, PROJECT)))
    metadata = Metadata(str(metadata_dir))
    cloud = Cloud(metadata, f"http://{fake.endpoint}/compute/v1", f"http://{fake.endpoint}/v2")
    settings = read_settings(metadata, tmp_path)
    stopped = stop_cluster(cloud, settings, Stop("idle", delete=False))
    assert sorted(stopped[:-1]) == ["ray-idle-worker-1", "ray-idle-worker-2",
                                    "ray-idle-worker-3"]
    assert stopped[-1] == "ray-idle-head-1"
    assert instance_statuses(fake, PROJECT, other_zone) == {
        "ray-idle-worker-3": "TERMINATED", "elsewhere": "RUNNING"}
    assert fake.instances(PROJECT, other_zone)["ray-idle-worker-3"]["labels"][
        "ray-autostop"] == "stopped"


def test_api_errors_while_stopping_are_retried_until_every_node_is_stopped(ray_head, fake,
                                                                          tmp_path):
    # The first attempt cannot list the nodes (403: given up, tried again at the next check);
    # the second meets a 503 (retried in place), then lists and stops.
    fake.faults.fail_next(403, 503, methods={"aggregatedList"})
    stopped = run_for(_daemon(ray_head, fake, tmp_path), WAIT_S)
    assert stopped[-1] == "ray-idle-head-1" and len(stopped) == 3
    assert fake.cloud.calls["aggregatedList"] == 3 and fake.cloud.calls["stop"] == 3
    assert _statuses(fake)["ray-idle-worker-1"] == "TERMINATED"


def test_a_node_that_refuses_to_stop_does_not_keep_the_others_running(ray_head, fake,
                                                                       tmp_path):
    fake.faults.fail_next(400, methods={"stop"})  # the first worker's stop is refused
    stopped = run_for(_daemon(ray_head, fake, tmp_path), WAIT_S)
    assert len(stopped) == 2 and stopped[-1] == "ray-idle-head-1"
    statuses = _statuses(fake)
    assert statuses["ray-idle-head-1"] == "TERMINATED"
    assert sorted(statuses.values()) == ["RUNNING", "RUNNING", "TERMINATED", "TERMINATED"]


def test_down_deletes_the_nodes_and_the_tpu_slices(ray_head, fake, tmp_path):
    fake.cloud.create_node(PROJECT, ZONE, "ray-idle-worker-tpu",
                           {"labels": ray_labels(CLUSTER, "worker", "tpu")})
    fake.cloud.create_node(PROJECT, ZONE, "not-ours", {"labels": ray_labels("x", "worker", "t")})
    daemon = _daemon(ray_head, fake, tmp_path, down=True, tpu=True)
    stopped = run_for(daemon, WAIT_S)
    assert stopped[-1] == "ray-idle-head-1" and "ray-idle-worker-tpu" in stopped
    assert list(fake.instances(PROJECT, ZONE)) == ["someone-else"]
    assert list(fake.tpu_nodes(PROJECT, ZONE)) == ["not-ours"]


def test_a_running_task_keeps_the_cluster_up(ray_head, fake, tmp_path):
    driver = ray_driver(ray_head, "@ray.remote\ndef work():\n    time.sleep(600)\n"
                               "ray.get(work.remote())")
    try:
        state = RayState(ray_head["dashboard"])
        _wait_for(lambda: "task work is RUNNING" in state.activity().busy, "the task runs")
        clock = Clock()
        assert _stays_up_past_the_window(_daemon(ray_head, fake, tmp_path, clock), clock)
    finally:
        driver.kill()
        driver.wait()
        _wait_for(lambda: not state.activity().busy, "the driver and its task end")


def test_a_submitted_job_keeps_the_cluster_up(ray_head, fake, tmp_path):
    from ray.job_submission import JobSubmissionClient

    jobs = JobSubmissionClient(ray_head["dashboard"])
    job = jobs.submit_job(entrypoint="sleep 600")
    state = RayState(ray_head["dashboard"])
    try:
        _wait_for(lambda: f"job {job} (submission) is RUNNING" in state.activity().busy,
                  "the job runs")
        clock = Clock()
        assert _stays_up_past_the_window(_daemon(ray_head, fake, tmp_path, clock), clock)
    finally:
        jobs.stop_job(job)
        _wait_for(lambda: not state.activity().busy, "the job and its supervisor end")


def test_a_live_actor_or_placement_group_keeps_the_cluster_up_after_its_driver_left(
        ray_head, fake, tmp_path):
    creator = ray_driver(ray_head, "from ray.util.placement_group import placement_group\n"
                                "@ray.remote(num_cpus=0)\nclass Keeper:\n"
                                "    def ping(self):\n        return 1\n"
                                "k = Keeper.options(name='keeper', namespace='autostop', "
                                "lifetime='detached').remote()\nray.get(k.ping.remote())\n"
                                "pg = placement_group([{'CPU': 1}], name='held', "
                                "lifetime='detached')\nray.get(pg.ready())")
    assert creator.wait(timeout=WAIT_S) == 0, creator.stdout.read()
    state = RayState(ray_head["dashboard"])
    try:
        _wait_for(lambda: sorted(state.activity().busy) == [
            "actor keeper is ALIVE", "placement group held is CREATED"],
            "only the actor and the placement group are left")
        clock = Clock()
        assert _stays_up_past_the_window(_daemon(ray_head, fake, tmp_path, clock), clock)
    finally:
        killer = ray_driver(ray_head, "from ray.util.placement_group import get_placement_group,"
                                   " remove_placement_group\n"
                                   "ray.kill(ray.get_actor('keeper', namespace='autostop'))\n"
                                   "remove_placement_group(get_placement_group('held'))")
        killer.wait(timeout=WAIT_S)
        _wait_for(lambda: not state.activity().busy, "the actor is dead, the group removed")


def test_a_job_during_the_window_restarts_the_countdown(ray_head, fake, tmp_path):
    clock = Clock()
    daemon = _daemon(ray_head, fake, tmp_path, clock)
    assert daemon.check() is None
    counting_from = daemon.idle_since
    driver = ray_driver(ray_head, "@ray.remote\ndef short():\n    return 1\n"
                               "ray.get(short.remote())")
    assert driver.wait(timeout=WAIT_S) == 0, driver.stdout.read()
    # No check saw the job run; its end, after the countdown began, restarts the countdown.
    clock.now = counting_from + WINDOW_S + 1
    assert daemon.check() is None
    assert daemon.idle_since > counting_from
    clock.now = daemon.idle_since + WINDOW_S + 1
    decision = daemon.check()
    assert decision is not None and decision[0].startswith(f"idle for {WINDOW_S / 60:g} min")


def test_cancel_stops_the_countdown(ray_head, fake, tmp_path):
    clock = Clock()
    daemon = _daemon(ray_head, fake, tmp_path, clock)
    assert daemon.check() is None and daemon.idle_since is not None
    (daemon.home / OVERRIDE_FILE).write_text(override_text(None, False))
    clock.now += 10 * WINDOW_S
    assert daemon.check() is None and daemon.idle_since is None
    (daemon.home / OVERRIDE_FILE).write_text(override_text(1, True))  # on again, to delete
    assert daemon.check() is None
    clock.now += 61
    decision = daemon.check()
    assert decision is not None and decision[1].down


def test_an_open_ssh_session_is_seen(stack, sshd):
    from ops.remote.ssh import connect_stack

    def ours() -> list[str]:  # other tests' sessions on this machine do not count here
        return [who for pid, who in ssh_sessions(Path("/proc")).items()
                if _descends_from(pid, sshd.process.pid)]

    with connect_stack(None) as connector:
        channel = connector.head().get_transport().open_session()
        channel.exec_command("cat")
        try:
            _wait_for(lambda: ours() == [f"{sshd.user}@notty"], "the session's process shows")
        finally:
            channel.close()
    _wait_for(lambda: ours() == [], "the session's process ends with it")


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
    return False


def test_an_ssh_session_keeps_the_cluster_up(ray_head, fake, tmp_path):
    clock = Clock()
    daemon = _daemon(ray_head, fake, tmp_path, clock)
    session = daemon.proc_dir / "4242"
    session.mkdir()
    (session / "cmdline").write_bytes(b"sshd: ubuntu@pts/0\0")
    assert _stays_up_past_the_window(daemon, clock)


def test_the_head_script_starts_the_daemon_from_its_metadata(tmp_path):
    from bootstrap.node_metadata import node_metadata
    from tests.support.bootstrap_stubs import run_script, stop_watchers

    entries = node_metadata(CONFIG, "head", "head")
    script = entries.pop("startup-script")
    closed = f"http://127.0.0.1:{free_port()}"  # nothing answers: Ray counts as busy
    run = run_script(script, tmp_path, entries, env={
        "RAY_HEAD_IP": "10.0.0.2", "RAY_BOOTSTRAP_DASHBOARD_URL": closed,
        "RAY_BOOTSTRAP_COMPUTE_URL": closed, "RAY_BOOTSTRAP_AUTOSTOP_POLL": "0.2"},
        keep_watcher=True)  # the daemon must outlive the run to be watched
    try:
        assert run.returncode == 0 and run.status == "ready", run.log
        assert "autostop daemon started" in run.log
        _wait_for(lambda: "autostop: busy: Ray's state API cannot be read" in
                  (tmp_path / "bootstrap.log").read_text(), "the daemon's first check")
        assert "stop after 10 idle minutes (metadata)" in (tmp_path / "bootstrap.log").read_text()
    finally:
        stop_watchers(tmp_path)


def test_changing_autostop_changes_only_the_heads_setting_entry():
    """`provider.autostop` reaches the head as one metadata value the daemon re-reads: no
    startup script, autoscaler config or worker changes, so nothing is recreated."""
    from bootstrap.node_metadata import node_metadata

    data = copy.deepcopy(CONFIG_DATA)
    data["provider"]["autostop"] = {"idle_minutes": 45, "down": True}
    changed = parse_cluster_config(data)
    before, after = node_metadata(CONFIG, "head", "head"), node_metadata(changed, "head", "head")
    assert {k for k in before if before[k] != after[k]} == {"ray-autostop"}
    assert json.loads(after["ray-autostop"])["idle_minutes"] == 45
    assert node_metadata(CONFIG, "worker", "cpu") == node_metadata(changed, "worker", "cpu")
    assert "autostop" not in changed.ray_dict()["provider"]


def test_a_bad_autostop_setting_names_its_path():
    from model.config import ConfigError

    data = copy.deepcopy(CONFIG_DATA)
    data["provider"]["autostop"] = {"idle_minutes": 0}
    with pytest.raises(ConfigError) as error:
        parse_cluster_config(data)
    assert "provider.autostop.idle_minutes" in str(error.value)
