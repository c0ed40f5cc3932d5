"""Every task that talks to a node reaches a private head through IAP: paramiko's
ProxyCommand runs `gcloud compute start-iap-tunnel`, here a stand-in `gcloud` on PATH that
checks its argument vector against the documented form and relays to the real local sshd.
The head's address is unroutable (TEST-NET-1), so only the tunnel can reach it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import paramiko
import pexpect
import pytest

from model.config import load_cluster_config
from ops.remote.host_keys import COMPUTE_ENDPOINT_ENV
from tests.fakes.compute import FakeComputeServer
from tests.support.sshd_server import (
    PROJECT_ROOT,
    TestStack,
    http_server,
    keygen,
    pin_host_key,
    stack_outputs_for,
)
from tests.support.tools import require_tool

HEAD, WORKER = "ray-local-head-0000", "ray-local-worker-0001"
PROJECT, ZONE = "test-project", "us-west1-a"
UNROUTABLE = "192.0.2.10"
STANDIN = Path(__file__).parents[2] / "fakes" / "gcloud_standin.py"
# What the program exports for a private cluster, read from the shipped stack.
IAP_TEMPLATE = load_cluster_config(
    PROJECT_ROOT / "stacks" / "clusters" / "private.yaml").provider.proxy_command


@pytest.fixture
def iap(stack: TestStack, sshd, tmp_path: Path) -> TestStack:
    """The stack of a private cluster: no external IP, the head behind IAP; workers through
    the head as always (their internal IP is the sshd's). The head's key is pinned under its
    instance name, as a first `--trust-first-use` leaves it."""
    private = private_stack(stack, sshd, tmp_path)
    pin_host_key(private.state_dir, private.name, sshd, host=HEAD)
    return private


@pytest.fixture
def iap_first_contact(stack: TestStack, sshd, tmp_path: Path) -> TestStack:
    """`iap` with the head's key not pinned yet: the first connection meets it."""
    return private_stack(stack, sshd, tmp_path)


def private_stack(stack: TestStack, sshd, tmp_path: Path) -> TestStack:
    bin_dir = tmp_path / "standin-bin"
    bin_dir.mkdir()
    gcloud = bin_dir / "gcloud"
    gcloud.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" "$@"\n')
    gcloud.chmod(0o755)
    outputs = stack_outputs_for(sshd, head_internal_ip=UNROUTABLE, head_external_ip=None,
                                ssh_proxy_command=IAP_TEMPLATE)
    outputs["nodes"][0].update(internal_ip=UNROUTABLE, external_ip=None)
    stack.write_outputs(outputs)
    stack.env.update(
        PATH=f"{bin_dir}{os.pathsep}{stack.env['PATH']}",
        IAP_STANDIN_LOG=str(tmp_path / "iap.log"),
        IAP_STANDIN_TARGETS=json.dumps(
            {"project": PROJECT, "zone": ZONE, "instances": {HEAD: "127.0.0.1"}}),
    )
    return stack


def tunnels(stack: TestStack) -> list[list[str]]:
    log = Path(stack.env["IAP_STANDIN_LOG"])
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def documented_argv(sshd) -> list[str]:
    return ["compute", "start-iap-tunnel", HEAD, str(sshd.port), "--listen-on-stdin",
            f"--zone={ZONE}", f"--project={PROJECT}"]


def test_the_private_stack_tunnels_through_iap_with_the_documented_flags():
    assert IAP_TEMPLATE == ("gcloud compute start-iap-tunnel {instance} {port} "
                            "--listen-on-stdin --zone={zone} --project={project}")


def test_exec_on_the_head_and_every_node_goes_through_the_tunnel(iap, sshd):
    result = iap.invoke("exec", "echo via-iap")
    assert (result.returncode, result.stdout) == (0, "via-iap\n"), result.stderr
    everywhere = iap.invoke("exec", "-A", "echo $((6*7))")
    assert everywhere.returncode == 0, everywhere.stderr
    assert sorted(everywhere.stdout.splitlines()) == [f"[{HEAD:<{len(WORKER)}}] 42",
                                                      f"[{WORKER}] 42"]
    # One tunnel per task: the worker is reached through the head, not through IAP.
    assert tunnels(iap) == [documented_argv(sshd)] * 2


def test_submit_status_and_syncs_go_through_the_tunnel(iap, sshd, tmp_path, submitted_script):
    script = submitted_script(tmp_path, "import sys; print('job', sys.argv[1])\n")
    submitted = iap.invoke("submit", str(script), "--", "ok")
    assert (submitted.returncode, submitted.stdout) == (0, "job ok\n"), submitted.stderr

    local = tmp_path / "up"
    local.mkdir()
    (local / "a.txt").write_text("synced\n")
    remote = tmp_path / "remote"
    assert iap.invoke("rsync-up", f"{local}/", str(remote)).returncode == 0
    assert (remote / "a.txt").read_text() == "synced\n"
    back = tmp_path / "back"
    down = iap.invoke("rsync-down", f"{remote}/", str(back))
    assert down.returncode == 0, down.stderr
    assert (back / "a.txt").read_text() == "synced\n"

    status = iap.invoke("status")
    assert HEAD in status.stdout  # `ray status` itself fails here: no Ray on this sshd
    assert "through" not in status.stderr and "cannot reach" not in status.stderr
    assert tunnels(iap) == [documented_argv(sshd)] * 4


def test_dashboard_forwards_through_the_tunnel(iap, sshd):
    with http_server(b"dashboard behind iap") as remote_port:
        process = subprocess.Popen(
            iap.spawn_args("dashboard", "--port", "0", "--remote-port", str(remote_port)),
            cwd=PROJECT_ROOT, env=iap.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            line = process.stdout.readline()
            assert line.startswith("dashboard: http://127.0.0.1:"), process.stderr.read()
            direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with direct.open(line.split()[1], timeout=30) as response:
                assert response.read() == b"dashboard behind iap"
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=30) == 0
        finally:
            process.kill()
            process.wait()
    assert tunnels(iap) == [documented_argv(sshd)]


def test_attach_gives_a_shell_through_the_tunnel(iap, sshd):
    child = pexpect.spawn(sys.executable, ["-m", "invoke", "attach"], cwd=str(PROJECT_ROOT),
                          env=iap.env, encoding="utf-8", timeout=30, dimensions=(40, 120))
    child.sendline("export PS1='remote''$ '")
    child.expect_exact("remote$ ")
    child.sendline("echo attached-$((6*7))")
    child.expect_exact("attached-42")
    child.sendline("exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert tunnels(iap) == [documented_argv(sshd)]


def test_ssh_config_carries_the_same_proxy_command_and_openssh_uses_it(iap, sshd):
    result = iap.invoke("ssh-config")
    assert result.returncode == 0, result.stderr
    config = (iap.state_dir / "test" / "ssh_config").read_text()
    assert f"    HostName {HEAD}\n" in config
    assert (f"    ProxyCommand gcloud compute start-iap-tunnel {HEAD} {sshd.port} "
            f"--listen-on-stdin --zone={ZONE} --project={PROJECT}\n") in config
    ssh = subprocess.run(
        [require_tool("ssh"), "-F", str(iap.state_dir / "test" / "ssh_config"),
         "-o", "BatchMode=yes", "ray-local", "echo via-openssh"],
        capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT, env=iap.env)
    assert ssh.stdout == "via-openssh\n", ssh.stderr
    # The task pinned the key under the instance name; OpenSSH found it there.
    assert tunnels(iap) == [documented_argv(sshd)] * 2


def test_the_host_key_is_still_checked_against_what_gce_publishes(iap_first_contact, sshd,
                                                                  tmp_path):
    iap = iap_first_contact
    genuine = paramiko.Ed25519Key.from_path(str(sshd.host_key))
    wrong = paramiko.Ed25519Key.from_path(str(keygen(tmp_path / "impostor")))
    with FakeComputeServer() as gce:
        env = {**iap.env, COMPUTE_ENDPOINT_ENV: gce.endpoint}
        gce.guest_attributes[(PROJECT, ZONE, HEAD)] = {
            f"hostkeys/{wrong.get_name()}": wrong.get_base64() + "\n"}
        refused = iap.invoke("exec", "true", env=env)
        assert refused.returncode == 1
        assert f"none of the host keys GCE publishes for instance {HEAD}" in refused.stderr
        gce.guest_attributes[(PROJECT, ZONE, HEAD)] = {
            f"hostkeys/{genuine.get_name()}": genuine.get_base64() + "\n"}
        accepted = iap.invoke("exec", "true", env=env)
        assert accepted.returncode == 0, accepted.stderr
        assert f"matches the key GCE publishes for {HEAD}" in accepted.stderr
        assert gce.cloud.calls["getGuestAttributes"] == 2
    pinned = (iap.state_dir / "test" / "known_hosts").read_text().splitlines()
    assert f"[{HEAD}]:{sshd.port} ssh-ed25519 {genuine.get_base64()}" in pinned


def test_without_gcloud_one_line_says_what_to_install(iap, tmp_path):
    nothing = tmp_path / "empty-bin"  # this machine has a real gcloud in /usr/bin
    nothing.mkdir()
    env = {**iap.env, "PATH": str(nothing)}
    result = iap.invoke("exec", "true", env=env)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert "gcloud is not on PATH" in line
    assert "install the Google Cloud CLI (https://cloud.google.com/sdk/docs/install)" in line
