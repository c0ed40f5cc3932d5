"""The head's config watcher: a `pulumi up` that changes metadata `ray-bootstrap-config`
reaches `~/ray_bootstrap_config.yaml` without a reboot; one watcher per head, however often
the startup script runs."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from bootstrap.node_metadata import BOOTSTRAP_CONFIG_KEY
from bootstrap.startup_script import WATCH_CONFIG_ARG, render_startup_script
from tests.support.bootstrap_stubs import (
    FakeGoogle,
    cluster,
    run_script,
    stop_watchers,
    watcher_pid_file,
)
from tests.support.proc_table import PROC, parent_and_state
from tests.support.waiting import WAIT_SECONDS, wait_for


def _watchers(state_dir: Path) -> list[int]:
    """Live watchers running the watcher copy in `state_dir`. The watcher's shell forks
    subshells (`$(cat pid_file)` every poll) that carry its command line for a moment: a
    process whose parent is itself a watcher is such a fork, not a second watcher."""
    marker = f"{state_dir}/config-watcher.sh\0{WATCH_CONFIG_ARG}".encode()
    parents: dict[int, int] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes():
                    parents[int(entry.name)], _ = parent_and_state(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return sorted(pid for pid, parent in parents.items() if parent not in parents)


def _replace_metadata(tmp_path: Path, key: str, value: str) -> None:
    """Replace a metadata value whole, as the metadata server serves a new one: a watcher
    polling the directory never sees it half written."""
    staged = tmp_path / "metadata" / f".{key}.new"
    staged.write_text(value)
    staged.rename(tmp_path / "metadata" / key)


@pytest.fixture
def head(tmp_path):
    """Run the head script (local mode) on demand; its watcher is stopped afterwards."""
    script = render_startup_script(cluster(), "head", "head_t")

    def run(config_text: str = "max_workers: 2\n"):
        return run_script(script, tmp_path, {BOOTSTRAP_CONFIG_KEY: config_text},
                          env={"RAY_HEAD_IP": "10.0.0.2", "RAY_BOOTSTRAP_WATCH_INTERVAL": "0.1"},
                          keep_watcher=True)

    yield run
    stop_watchers(tmp_path)


def test_changed_config_metadata_rewrites_the_config_file(head, tmp_path):
    run = head()
    assert run.returncode == 0, run.log
    config_file = run.home / "ray_bootstrap_config.yaml"
    assert config_file.read_text() == "max_workers: 2\n"
    _replace_metadata(tmp_path, BOOTSTRAP_CONFIG_KEY, "max_workers: 5\n")
    wait_for(lambda: config_file.read_text() == "max_workers: 5\n", "config rewritten")
    # The watcher logs just after the rename that the line above saw: wait for it too.
    log_file = tmp_path / "bootstrap.log"
    wait_for(lambda: "metadata ray-bootstrap-config changed: rewrote" in log_file.read_text(),
             "the rewrite logged")
    assert not config_file.with_name("ray_bootstrap_config.yaml.tmp").exists()


def test_watcher_outlives_the_script_and_a_rerun_keeps_the_one_running(head, tmp_path):
    first = head()
    assert first.returncode == 0, first.log
    state_dir = tmp_path / "state"
    pid = int(watcher_pid_file(tmp_path).read_text())
    assert _watchers(state_dir) == [pid]
    second = head()
    assert second.returncode == 0, second.log
    assert second.status == "ready"
    assert f"config watcher already runs (pid {pid}): kept" in second.log
    assert int(watcher_pid_file(tmp_path).read_text()) == pid
    assert _watchers(state_dir) == [pid]


def test_rerun_with_a_changed_script_replaces_the_watcher(head, tmp_path):
    head()
    old_pid = int(watcher_pid_file(tmp_path).read_text())
    metadata_script = tmp_path / "metadata" / "startup-script"
    changed = render_startup_script(cluster(head_setup_commands=["record new"]), "head", "head_t")
    metadata_script.write_text(changed)
    run = run_script(changed, tmp_path, env={"RAY_HEAD_IP": "10.0.0.2"}, keep_watcher=True)
    assert run.returncode == 0, run.log
    new_pid = int(watcher_pid_file(tmp_path).read_text())
    assert new_pid != old_pid
    wait_for(lambda: _watchers(tmp_path / "state") == [new_pid], "one watcher left")


def test_watcher_on_gce_long_polls_the_attribute_by_etag(tmp_path):
    """Without a metadata dir the watcher asks the metadata server, which holds each request
    until the value differs from the ETag the watcher last saw."""
    script = tmp_path / "startup-script"
    script.write_text(render_startup_script(cluster(), "head", "head_t"))
    home, state = tmp_path / "home", tmp_path / "state"
    home.mkdir()
    state.mkdir()
    with FakeGoogle(attributes={BOOTSTRAP_CONFIG_KEY: "max_workers: 2\n"}) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_BOOTSTRAP_")}
        env.update(fake.env(), RAY_BOOTSTRAP_LOG=str(tmp_path / "bootstrap.log"),
                   RAY_BOOTSTRAP_STATE_DIR=str(state), RAY_BOOTSTRAP_WATCH_TIMEOUT="30")
        watcher = subprocess.Popen(["sh", str(script), WATCH_CONFIG_ARG, str(home), ""],
                                   env=env, start_new_session=True)
        try:
            config_file = home / "ray_bootstrap_config.yaml"
            wait_for(config_file.exists, "first config written")
            assert config_file.read_text() == "max_workers: 2\n"
            wait_for(lambda: any("wait_for_change=true" in r for r in fake.requests),
                     "a long poll held open")
            fake.set_attribute(BOOTSTRAP_CONFIG_KEY, "max_workers: 7\n")
            wait_for(lambda: config_file.read_text() == "max_workers: 7\n",
                     "config rewritten after the change")
        finally:
            os.killpg(watcher.pid, signal.SIGTERM)
            watcher.wait(timeout=WAIT_SECONDS)
    path = "/computeMetadata/v1/instance/attributes/ray-bootstrap-config"
    assert fake.requests[0] == path
    assert f"{path}?wait_for_change=true&last_etag={1:016x}&timeout_sec=30" in fake.requests


def test_with_docker_the_new_config_is_copied_into_the_container(tmp_path):
    config = cluster(docker={"image": "rayproject/ray:2.9", "container_name": "rc"})
    script = render_startup_script(config, "head", "head_t")
    try:
        run = run_script(script, tmp_path, {BOOTSTRAP_CONFIG_KEY: "max_workers: 2\n"},
                         env={"RAY_HEAD_IP": "10.0.0.2", "RAY_BOOTSTRAP_WATCH_INTERVAL": "0.1",
                              "STUB_CONTAINER_UID": "1000", "STUB_CONTAINER_GID": "1000"},
                         keep_watcher=True)
        assert run.returncode == 0, run.log
        calls = tmp_path / "calls"
        before = len(calls.read_text().splitlines())
        _replace_metadata(tmp_path, BOOTSTRAP_CONFIG_KEY, "max_workers: 5\n")
        moved = ("docker exec -u 0 rc mv -f /root/ray_bootstrap_config.yaml.tmp "
                 "/root/ray_bootstrap_config.yaml")
        wait_for(lambda: calls.read_text().splitlines()[before:].count(moved) == 1,
                 "config copied")
    finally:
        stop_watchers(tmp_path)
    lines = calls.read_text().splitlines()[before:]
    copied = (f"docker cp {run.home}/ray_bootstrap_config.yaml "
              "rc:/root/ray_bootstrap_config.yaml.tmp")
    # The container's user (not root) owns the new copy, as it owned the first one.
    chown = "docker exec -u 0 rc chown 1000:1000 /root/ray_bootstrap_config.yaml.tmp"
    assert lines.index(copied) < lines.index(chown) < lines.index(moved)
