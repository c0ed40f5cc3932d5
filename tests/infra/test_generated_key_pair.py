"""The key pair a stack generates for its nodes (infra/ssh_keys.py) is one that GCE's
`ssh-keys` metadata line carries and both SSH clients we drive log in with: OpenSSH's `ssh`
(Ray's command runner on the head) and paramiko (the tasks), against a real sshd that
authorizes exactly the metadata line's key."""

from __future__ import annotations

import subprocess

import paramiko

from infra.ssh_keys import _KeyPairProvider, public_key_of, ssh_keys_entry
from ops.remote.ssh_direct import load_private_key


def test_the_generated_pair_logs_in_with_openssh_and_paramiko(local_sshd, tmp_path):
    made = _KeyPairProvider().create({"comment": "ubuntu"}).outs
    private, public = made["private_key"], made["public_key"]
    assert public_key_of(private) == public  # the private half is the public half's
    entry = ssh_keys_entry("ubuntu", public)
    kind, body = entry.removeprefix("ubuntu:").split()[:2]
    assert (kind, body) == tuple(public.split()[:2])
    assert kind == "ssh-ed25519"  # not RSA: made in microseconds, not CPU-seconds
    key_file = tmp_path / "cluster-key"
    key_file.write_text(private)
    key_file.chmod(0o600)
    # OpenSSH reads it and derives the same public key.
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(key_file)], capture_output=True,
                             text=True, check=True).stdout.split()
    assert derived[:2] == [kind, body]
    folder = tmp_path / "sshd"
    folder.mkdir()
    with local_sshd(folder) as server:
        # sshd reads its AuthorizedKeysFile at each login: this key alone, not the test's own
        (folder / "authorized_keys").write_text(f"{kind} {body}\n")
        run = subprocess.run(
            ["ssh", "-i", str(key_file), "-p", str(server.port), "-o", "BatchMode=yes",
             "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
             "-o", f"UserKnownHostsFile={tmp_path / 'known_hosts'}",
             f"{server.user}@127.0.0.1", "echo logged-in"],
            capture_output=True, text=True, timeout=60)
        assert run.stdout.strip() == "logged-in", run.stderr
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        client.connect("127.0.0.1", port=server.port, username=server.user,
                       pkey=load_private_key(private), look_for_keys=False,
                       allow_agent=False, timeout=30)
        try:
            _, out, _ = client.exec_command("echo logged-in")
            assert out.read().decode().strip() == "logged-in"
        finally:
            client.close()
