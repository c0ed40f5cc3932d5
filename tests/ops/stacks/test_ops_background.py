"""The background processes (ops.stacks.background: the warm SSH daemons, the outputs keeper) hold
the stack's key, the Ray token and the outputs: each starts with a minimal environment and
makes itself undumpable (no core file, PR_SET_DUMPABLE 0) before it reads its settings. The
warm daemon's own check is in tests/ops/remote/test_ops_warm_ssh.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ops.stacks.background import PROJECT_ROOT, minimal_environment, request_line, start_detached
from tests.support.socket_peers import daemon_pid
from tests.support.waiting import wait_for


def test_the_environment_kept_is_where_things_are_and_our_own_settings():
    task = {"PATH": "/bin", "HOME": "/home/u", "LC_ALL": "C", "RAY_GCP_STATE_DIR": "/s",
            "CLOUDSDK_CONFIG": "/g", "PULUMI_CONFIG_PASSPHRASE": "p", "PULUMI_ACCESS_TOKEN": "t",
            "AWS_SECRET_ACCESS_KEY": "a", "GOOGLE_OAUTH_ACCESS_TOKEN": "g", "SSH_AUTH_SOCK": "/a"}
    assert minimal_environment(task) == {"PATH": "/bin", "HOME": "/home/u", "LC_ALL": "C",
                                         "RAY_GCP_STATE_DIR": "/s", "CLOUDSDK_CONFIG": "/g"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_GET_DUMPABLE is Linux's")
def test_a_background_main_is_undumpable_before_it_reads_its_settings():
    code = ("import ctypes\nfrom ops.stacks.background import main_with_settings\n"
            "main_with_settings(lambda settings: print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),"
            " settings['x']))")
    done = subprocess.run([sys.executable, "-c", code], input='{"x": "read"}', text=True,
                          capture_output=True, cwd=PROJECT_ROOT, timeout=60)
    assert done.stdout == "0 read\n", done.stderr  # PR_GET_DUMPABLE: 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_outputs_keeper_holds_no_secret_of_the_tasks_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "the-passphrase")
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "a-token")
    folder = tmp_path / "keeper"
    folder.mkdir(mode=0o700)
    start_detached("ops.stacks.outputs_keeper", {"folder": str(folder), "idle_seconds": 30,
                                          "slot": "s", "key": "k", "outputs": {"a": 1}})
    sock = folder / "keeper.sock"
    wait_for(lambda: request_line(sock, {"get": "s", "key": "k"}), "the keeper answering")
    pid = daemon_pid(sock)
    try:
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        names = {entry.split(b"=", 1)[0].decode() for entry in environment if entry}
        assert "PULUMI_CONFIG_PASSPHRASE" not in names and "GOOGLE_OAUTH_ACCESS_TOKEN" not in names
        assert "PATH" in names
        limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
        core = next(line for line in limits if line.startswith("Max core file size"))
        assert core.split()[4:6] == ["0", "0"]
    finally:
        if json.loads(request_line(sock, {"stop": True}) or b"{}") != {"bye": True}:
            os.kill(pid, signal.SIGTERM)  # not answering: stopped all the same
        wait_for(lambda: not os.path.exists(f"/proc/{pid}/environ") or
                 "zombie" in Path(f"/proc/{pid}/status").read_text(), "the keeper to end")
