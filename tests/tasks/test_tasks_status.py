"""`invoke status`, `invoke ssh-config` and `invoke --list`."""

from __future__ import annotations

import io
import os
import stat
import subprocess

import pytest

from ops.cloud.status import nodes_table, ray_status
from ops.errors import OpsError
from ops.remote.ssh import Connector
from ops.stacks.stack import load_outputs
from tests.support.sshd_server import PROJECT_ROOT

TASKS = ["up", "preview", "down", "refresh", "attach", "exec", "submit", "rsync-up",
         "rsync-down", "file-mounts", "status", "ssh-config"]


def test_list_shows_every_task_with_help(stack):
    listing = stack.invoke("--list").stdout
    for name in TASKS:
        line = next(line for line in listing.splitlines() if line.strip().startswith(name + " "))
        assert len(line.split(maxsplit=1)) == 2, f"{name} has no help"
    for name in TASKS:
        help_text = stack.invoke("--help", name).stdout
        assert "--stack" in help_text


def test_nodes_table_lists_each_node_with_ips(stack):
    table = nodes_table(load_outputs()).splitlines()
    assert table[0].split() == ["NAME", "TYPE", "KIND", "MARKET", "STATE", "INTERNAL", "IP",
                                "EXTERNAL", "IP"]
    assert table[2].split() == ["ray-local-worker-0001", "ray_worker_small", "worker", "-",
                                "RUNNING", "127.0.0.1", "-"]


def test_head_not_ready_shows_bootstrap_log_tail(stack, tmp_path, monkeypatch):
    log = tmp_path / "ray-bootstrap.log"
    log.write_text("".join(f"step {i}\n" for i in range(30)) + "installing ray...\n")
    with Connector(load_outputs(), announce=io.StringIO()) as connector, \
            pytest.raises(OpsError) as not_ready:
        # stands in for `ray status` on a head whose Ray is not up yet
        ray_status(connector, bootstrap_log=str(log), command="echo no cluster >&2; exit 1")
    message = str(not_ready.value)
    assert message.startswith("head not ready yet")
    assert "installing ray..." in message and "step 29" in message and "step 5\n" not in message


def test_status_task_prints_nodes_and_ray_status(stack, monkeypatch, capsys):
    from invoke import Collection, Program

    import tasks

    monkeypatch.setattr("ops.cloud.status.RAY_STATUS_COMMAND", "echo '1 node(s) healthy'")
    Program(namespace=Collection.from_module(tasks)).run(["invoke", "status"], exit=False)
    out = capsys.readouterr().out
    assert out.index("ray-local-head-0000") < out.index("1 node(s) healthy")


def test_status_task_fails_in_one_clear_message_when_ray_is_down(stack, monkeypatch, capsys):
    from invoke import Collection, Program

    import tasks

    monkeypatch.setattr("ops.cloud.status.RAY_STATUS_COMMAND", "exit 1")
    with pytest.raises(SystemExit) as exited:
        Program(namespace=Collection.from_module(tasks)).run(["invoke", "status"])
    assert exited.value.code == 1
    assert "error: head not ready yet" in capsys.readouterr().err


def test_ssh_config_block_works_with_openssh(stack):
    result = stack.invoke("ssh-config")
    assert result.returncode == 0, result.stderr
    config = stack.state_dir / "test" / "ssh_config"
    key = stack.state_dir / "test" / "id_ssh"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert "StrictHostKeyChecking yes" in config.read_text()
    assert "PRIVATE KEY" not in result.stdout + result.stderr
    ssh = subprocess.run(
        ["ssh", "-F", str(config), "-o", "BatchMode=yes", "ray-local", "echo via-openssh"],
        capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT,
    )
    assert ssh.stdout == "via-openssh\n", ssh.stderr
