"""`local-down` stops only the caller's own processes that the cluster started
(bootstrap.local_processes): one that names the cluster's folder but was not started by it (a
`tail -f` of its log) keeps running, another user's is never looked into nor signalled, and
the cluster's own go down with their children."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.local_processes import any_alive, processes_matching, stop_processes
from tests.support.waiting import wait_for

NOBODY = 65534
TAG = "RAY_GCP_LOCAL_CLUSTER"


def sleeper(marker: str, env: dict[str, str] | None = None, uid: int | None = None,
            child: bool = False) -> subprocess.Popen[bytes]:
    """`sh -c 'sleep 60' <marker>` (the marker on its command line), with a sleeping child of
    its own when `child`, run as `uid` when given."""
    script = "sleep 60 & wait" if child else "sleep 60; true"  # sh stays, its $0 the marker

    def as_user() -> None:
        if uid is not None:
            os.setgid(uid)
            os.setuid(uid)

    return subprocess.Popen(["sh", "-c", script, marker], env={**os.environ, **(env or {})},
                            preexec_fn=as_user if uid is not None else None)


@pytest.fixture
def started():
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        process.kill()
        process.wait()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to start another user's process")
def test_another_users_process_naming_the_cluster_is_never_signalled(tmp_path, started):
    marker = str(tmp_path / "cluster")
    theirs = sleeper(marker, {TAG: marker}, uid=NOBODY)
    started.append(theirs)
    wait_for(lambda: marker in Path(f"/proc/{theirs.pid}/cmdline").read_bytes().decode(
        errors="replace"), "the other user's process to start")
    assert processes_matching([marker]) == set()
    assert stop_processes([marker], f"{TAG}={marker}", grace_seconds=1) == set()
    assert theirs.poll() is None


def test_only_the_processes_the_cluster_started_are_stopped_with_their_children(tmp_path,
                                                                               started):
    marker = str(tmp_path / "cluster")
    tag = f"{TAG}={marker}"
    ours = sleeper(marker, {TAG: marker}, child=True)
    tail = sleeper(marker)  # names the cluster's folder, not started by it
    other_cluster = sleeper(marker, {TAG: marker + "-other"})
    started += [ours, tail, other_cluster]

    def children() -> set[int]:
        return {int(pid) for pid in Path(f"/proc/{ours.pid}/task/{ours.pid}/children")
                .read_text().split()}

    wait_for(children, "the cluster process's child to start")
    kids = children()
    assert processes_matching([marker], tag) == {ours.pid, *kids}
    stopped = stop_processes([marker], tag, grace_seconds=5)
    assert stopped == {ours.pid, *kids}
    ours.wait(timeout=10)
    wait_for(lambda: not any_alive(kids), "the child to end")
    assert tail.poll() is None and other_cluster.poll() is None


def test_this_python_is_never_its_own_match(tmp_path):
    assert os.getpid() not in processes_matching([sys.executable])
