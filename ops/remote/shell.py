"""What `invoke attach`, `exec` and `submit` do, from their flags to the remote exit status.

Each verb checks its flags before it connects (a wrong flag fails fast and in one line), then
opens the stack's connections, holds the port forwards asked for while the command or shell
runs, and says how to attach when the command was detached into tmux/screen. exec and submit
go through the nodes' warm connections (ops.remote.warm) unless they forward ports; paramiko
is imported only for a direct connection.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ops.errors import OpsError
from ops.remote.commands import exec_on_all, exec_on_node, remainder_argv
from ops.remote.commands import submit as submit_script
from ops.remote.sessions import (
    attach_hint,
    detacher,
    forwarding,
    new_session_command,
    one_node_only,
)
from ops.remote.ssh import connect_stack


def attach(stack: str | None, tmux: bool, screen: bool, port_forward: list[str] | None,
           node: str | None, new: bool, trust_first_use: bool = False) -> int:
    """A shell on the head (or `node`), in the shared or a new tmux/screen session, with
    local port forwards printed as they start; the shell's exit status."""
    from ops.remote.attach import PortForward, interactive_shell, parse_forward, session_command

    command = new_session_command(tmux, screen) if new else session_command(tmux, screen)
    ports = [parse_forward(spec) for spec in port_forward or []]
    with connect_stack(stack, trust_first_use) as connector:
        target = connector.outputs.node(node) if node else None
        client = connector.node(target) if target else connector.head()
        forwards = [PortForward(client.get_transport(), *pair).start() for pair in ports]
        for forward in forwards:
            print(f"forwarding 127.0.0.1:{forward.local_port} -> port {forward.remote_port}")
        try:
            return interactive_shell(client, command)
        finally:
            for forward in forwards:
                forward.close()


def exec_command(stack: str | None, cmd: str, all_nodes: bool, node: str | None, docker: bool,
                 login: bool, tmux: bool, screen: bool, port_forward: list[str] | None,
                 trust_first_use: bool = False, parallel: str | None = None,
                 out: str | None = None) -> int:
    """`cmd` on the head, `node` or every node (`parallel` at a time, output into the folder
    `out` when given); the remote exit status (the first non-zero)."""
    if all_nodes and node:
        raise OpsError("--all-nodes and --node are alternatives: pick one")
    if not all_nodes and (parallel is not None or out is not None):
        raise OpsError("--parallel and --out work with --all-nodes: add it, or drop them")
    if all_nodes:
        from ops.remote.fanout import check_parallel  # not for one node: exec starts fast

        one_node_only(detacher(tmux, screen), port_forward)
        at_once = check_parallel(parallel)
        with connect_stack(stack, trust_first_use, warm=True) as connector:
            return exec_on_all(connector, cmd, docker, login, at_once,
                               Path(out) if out is not None else None)
    # Port forwards need the transport itself: they connect directly.
    with connect_stack(stack, trust_first_use, warm=not port_forward) as connector:
        wrap = detacher(tmux, screen)
        target = connector.outputs.node(node) if node else None
        client = connector.node(target) if target else connector.head()
        with forwarding(client, port_forward):
            status = exec_on_node(connector, target, cmd, docker, login, wrap)
        if wrap and status == 0:
            print(attach_hint(tmux))
        return status


def submit(stack: str | None, script: str, remainder: str, argv: list[str], args: str | None,
           docker: bool, login: bool, tmux: bool, screen: bool,
           port_forward: list[str] | None, trust_first_use: bool = False) -> int:
    """Upload `script` and run it on the head with the arguments after `--` (from invoke's
    `remainder` and the process's `argv`, which keeps quoted arguments whole) or Ray's
    deprecated `--args`; the remote exit status."""
    script_args = remainder_argv(remainder, argv)
    if not Path(script).is_file():
        raise OpsError(f"{script} is not a file: pass the path of a Python script")
    with connect_stack(stack, trust_first_use, warm=not port_forward) as connector:
        if args is not None:  # Ray's deprecated `--args "..."`
            if script_args:
                raise OpsError("--args and `-- ARGS` are alternatives: use only `-- ARGS`")
            script_args = shlex.split(args)
        wrap = detacher(tmux, screen)
        with forwarding(connector.head(), port_forward):
            status = submit_script(connector, Path(script), script_args, docker, login, wrap)
        if wrap and status == 0:
            print(attach_hint(tmux))
        return status
