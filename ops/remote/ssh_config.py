"""`invoke ssh-config`: a Host block for the head that plain `ssh`/`scp`/VS Code can use.

It points at the same pinned known_hosts file with StrictHostKeyChecking yes, at a copy of
the stack's key written 0600 (OpenSSH refuses keys other users can read), or with OS Login at
your own key (ops.remote.os_login: it expires within hours, any task renews it), and through
the same ProxyCommand the tasks use (IAP for a private cluster).
"""

from __future__ import annotations

import os
from pathlib import Path

from model.private_files import write_private_file
from ops.paths import in_existing_folder, open_no_follow, state_dir
from ops.remote.ssh import connect_stack
from ops.remote.ssh_proxy import head_host, proxy_command
from ops.stack import StackOutputs


def write_private_key(key_text: str, path: Path) -> Path:
    """Create the key file 0600 from the start (no window where it is world-readable), and
    never through a symlink planted where it goes."""
    with open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) as key_file:
        os.fchmod(key_file.fileno(), 0o600)
        key_file.write((key_text.rstrip("\n") + "\n").encode())
    return path


def host_alias(outputs: StackOutputs) -> str:
    return f"ray-{outputs.cluster_name}"


def host_block(outputs: StackOutputs, key_path: Path, known_hosts: Path, user: str) -> str:
    """Through a tunnel (IAP), the host is the instance name: the tasks pin its key so.
    `user` is the one the tasks log in as (OS Login's POSIX name, or auth.ssh_user)."""
    proxy = proxy_command(outputs)
    return "\n".join([
        f"Host {host_alias(outputs)}",
        f"    HostName {head_host(outputs, proxy)}",
        *([f"    ProxyCommand {proxy}"] if proxy else []),
        f"    User {user}",
        f"    Port {outputs.ssh_port}",
        f"    IdentityFile {key_path}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {known_hosts}",
        "    StrictHostKeyChecking yes",
        "",
    ])


def write_ssh_config(
    outputs: StackOutputs, known_hosts: Path, user: str, dest: Path | None = None,
    key_path: Path | None = None,
) -> Path:
    """Write the Host block under the stack's state dir (or `dest`), and the stack's key
    beside it unless the block names `key_path` (your OS Login key); the block's path."""
    directory = state_dir(outputs.stack)
    key_path = key_path or write_private_key(outputs.ssh_private_key, directory / "id_ssh")
    dest = dest or directory / "ssh_config"
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_private_file(dest, host_block(outputs, key_path.resolve(), known_hosts.resolve(),
                                        user))
    return dest


def stack_ssh_config(stack: str | None, output: str | None,
                     trust_first_use: bool = False) -> str:
    """`invoke ssh-config`: pin the head's host key, write the block (to `output` when given)
    and say how to use it."""
    chosen = in_existing_folder(output, "--output") if output else None
    with connect_stack(stack, trust_first_use) as connector:
        connector.head()  # pins the head's host key, so the block can say StrictHostKeyChecking
        own = connector.os_login_key().path if connector.outputs.os_login else None
        path = write_ssh_config(connector.outputs, connector.known_hosts,
                                connector.login_user(), chosen, own)
    return (f"wrote {path}: add `Include {path.resolve()}` to ~/.ssh/config, then "
            f"`ssh {host_alias(connector.outputs)}`")
