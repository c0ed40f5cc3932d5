"""Run commands on nodes with live output and the remote exit status: `exec`, `submit`, `--all`."""

from __future__ import annotations

import posixpath
import shlex
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ops.errors import OpsError
from ops.remote.eof import send_eof
from ops.remote.ray_auth import with_ray_auth
from ops.remote.untrusted import (
    OUTPUT_CAP,
    CappedTail,
    drain,
    drain_in_background,
    sftp_answers,
)

if TYPE_CHECKING:  # paramiko is imported by ops.remote.ssh when a connection is made
    import paramiko

    from ops.remote.ssh import Connector
    from ops.stacks.stack import Node, StackOutputs

_CHUNK = 32768
RAY_ON_PATH = "command -v ray >/dev/null 2>&1"


def login_shell(command: str) -> str:
    """Exactly Ray's rule: bash as a login shell, so ~/.profile's PATH (pip --user, conda)."""
    return f"bash --login -c {shlex.quote(command)}"


def node_shell(command: str, login: bool = False) -> str:
    """bash running `command` with `ray` on PATH; a login shell only when that needs one.

    sshd runs commands through the user's shell, which on Debian/Ubuntu already reads ~/.bashrc
    (conda's and pyenv's init live there). A login shell reads /etc/profile and ~/.profile on
    top of it, and ~/.profile reads ~/.bashrc a second time: on every call that costs as much as
    the rc files do (110 ms on the bench's pyenv box). So the login shell starts only when `ray`
    is not on the PATH we already have (`pip install --user` puts it in ~/.local/bin, which
    only ~/.profile adds); `login=True` always starts one, for variables only ~/.profile sets.
    `--norc` keeps the non-login bash from reading ~/.bashrc again.
    """
    if login:
        return login_shell(command)
    quoted = shlex.quote(command)
    return (
        f"{RAY_ON_PATH} && exec bash --norc --noprofile -c {quoted}; "
        f"exec bash --login -c {quoted}"
    )


def remainder_argv(remainder: str, argv: Sequence[str]) -> list[str]:
    """The words after `--` exactly as the user's shell split them.

    invoke joins them with spaces (`c.remainder`), losing the quoting of "a b". It splits at the
    first `--` of the command line, so the same split of `argv` recovers them; that is trusted
    only when it joins back to the remainder (else: a task called another way, shlex it).
    """
    argv = list(argv)
    if "--" in argv:
        words = argv[argv.index("--") + 1 :]
        if " ".join(words) == remainder:
            return words
    return shlex.split(remainder)


def in_container(command: str, container: str) -> str:
    """Run inside the cluster's docker container, where Ray's setup commands ran."""
    if not container:
        raise OpsError(
            "this stack runs without docker (docker_container_name is empty): drop --docker"
        )
    return f"docker exec {shlex.quote(container)} /bin/bash -lc {shlex.quote(command)}"


class PrefixedLines:
    """Writes whole lines with a node prefix, so parallel nodes' output does not interleave."""

    def __init__(self, prefix: str, sink: BinaryIO, lock: threading.Lock) -> None:
        self.prefix = prefix.encode()
        self.sink = sink
        self.lock = lock
        self.pending = b""

    def write(self, data: bytes) -> None:
        *lines, self.pending = (self.pending + data).split(b"\n")
        if lines:
            with self.lock:
                self.sink.write(b"".join(self.prefix + line + b"\n" for line in lines))
                self.sink.flush()

    def flush(self) -> None:
        """Whole lines are flushed as written; a partial line waits for its newline or end()."""

    def end(self) -> None:
        if self.pending:
            with self.lock:
                self.sink.write(self.prefix + self.pending + b"\n")
                self.sink.flush()
            self.pending = b""


def stream_command(
    client: paramiko.SSHClient,
    command: str,
    stdout: BinaryIO | PrefixedLines,
    stderr: BinaryIO | PrefixedLines,
) -> int:
    """Run `command`, copying its stdout/stderr as they arrive; returns its exit status.

    Blocking reads (stderr on a helper thread) wake on each packet and on EOF, so output is live
    and the command's end is seen at once, without polling.
    """
    channel = client.get_transport().open_session()
    try:
        channel.exec_command(command)
        send_eof(channel)  # no stdin: commands that read it see EOF instead of hanging
        stderr_reader = threading.Thread(
            target=_copy, args=(channel.recv_stderr, stderr), daemon=True
        )
        stderr_reader.start()
        _copy(channel.recv, stdout)
        stderr_reader.join()
        return channel.recv_exit_status()
    finally:
        channel.close()


def _copy(receive: Callable[[int], bytes], sink: BinaryIO | PrefixedLines) -> None:
    while data := receive(_CHUNK):
        sink.write(data)
        sink.flush()
    if isinstance(sink, PrefixedLines):
        sink.end()


def run_captured(
    client: paramiko.SSHClient, command: str, cap: int = OUTPUT_CAP
) -> tuple[int, str, str]:
    """Small commands whose output we inspect (ray status, log tails). Both streams are read
    at once to their end, and only the last `cap` bytes of each are kept (ops/remote/untrusted.py):
    a node that floods one of them neither stalls the call nor fills our memory."""
    channel = client.get_transport().open_session()
    out, err = CappedTail(cap), CappedTail(cap)
    try:
        channel.exec_command(command)
        send_eof(channel)
        stderr_reader = drain_in_background(channel.recv_stderr, err.write)
        drain(channel.recv, out.write)
        stderr_reader.join()
        status = channel.recv_exit_status()
        return status, out.text(), err.text()
    finally:
        channel.close()


def exec_on_node(
    connector: Connector,
    node: Node | None,
    command: str,
    docker: bool = False,
    login: bool = False,
    wrap: Callable[[str], str] | None = None,
) -> int:
    """One node (the head by default), output straight to ours; the remote status is returned.
    `wrap` turns the final shell command into another (e.g. a detached tmux window). It runs
    with Ray's token auth when the stack has it (`ray status`, `ray job` work as typed)."""
    command = with_ray_auth(command, connector.outputs)
    if docker:
        command = in_container(command, connector.outputs.docker_container_name)
    client = connector.node(node) if node else connector.head()
    shell = node_shell(command, login)
    return stream_command(
        client, wrap(shell) if wrap else shell, sys.stdout.buffer, sys.stderr.buffer
    )


def exec_on_all(
    connector: Connector, command: str, docker: bool, login: bool, parallel: int,
    out: Path | None = None,
) -> int:
    """Every node, `parallel` at a time, output lines prefixed `[node] ` (or into
    `out`/NODE.out and NODE.err); a line per node that failed and a summary on stderr. The
    first failed node's status (255: it could not be reached), 0 when all succeeded."""
    # not for one node: exec starts fast
    from ops.remote.fanout import every_node, fan_out, fan_out_status

    command = with_ray_auth(command, connector.outputs)
    if docker:
        command = in_container(command, connector.outputs.docker_container_name)
    shell = node_shell(command, login)
    every = every_node(connector, "exec")
    nodes = every.nodes
    connector.warm_workers = False  # a background process per node is no cache at 100 nodes
    connector.head()  # connect (and pin) the jump host once, before the threads race for it
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    width = max(len(node.name) for node in nodes)

    def run(node: Node) -> int:
        if out is not None:
            with (out / f"{node.name}.out").open("wb") as stdout, \
                    (out / f"{node.name}.err").open("wb") as stderr:
                return stream_command(connector.node(node), shell, stdout, stderr)
        prefix = f"[{node.name:<{width}}] "
        stdout = PrefixedLines(prefix, sys.stdout.buffer, lock)
        stderr = PrefixedLines(prefix, sys.stderr.buffer, lock)
        return stream_command(connector.node(node), shell, stdout, stderr)

    def say(line: str) -> None:
        with lock:
            sys.stderr.buffer.write(line.encode() + b"\n")
            sys.stderr.buffer.flush()

    return fan_out_status(fan_out(nodes, run, parallel, "exec", say, every.note))


def submit_command(outputs: StackOutputs, remote_name: str, args: list[str],
                   docker: bool = False) -> str:
    """The shell command that runs the uploaded script `remote_name` (in the head's home) with
    python, with Ray's token auth when the stack has it, so its `ray.init()` is served."""
    argv = " ".join(shlex.quote(arg) for arg in [remote_name, *args])
    if docker:
        # The script lands on the host; the container sees it at an absolute path in /tmp.
        inside = f"/tmp/{remote_name}"
        argv = " ".join(shlex.quote(arg) for arg in [inside, *args])
        run = in_container(with_ray_auth(f"python {argv}", outputs),
                           outputs.docker_container_name)
        container = shlex.quote(outputs.docker_container_name)
        return f"docker cp {shlex.quote(remote_name)} {container}:{inside} && {run}"
    # `python` as Ray runs it; stock Ubuntu images only have python3
    return with_ray_auth(f'PY=$(command -v python || command -v python3); exec "$PY" {argv}',
                         outputs)


def submit(
    connector: Connector,
    script: Path,
    args: list[str],
    docker: bool = False,
    login: bool = False,
    wrap: Callable[[str], str] | None = None,
) -> int:
    """Upload `script` to the head's home over SFTP and run it there (`submit_command`);
    `wrap` turns the final shell command into another (e.g. a detached tmux window)."""
    if not script.is_file():
        raise OpsError(f"{script} is not a file: pass the path of a Python script")
    client = connector.head()
    remote_name = posixpath.basename(script.name)
    with sftp_answers(f"uploading {script.name}"):
        sftp = client.open_sftp()
        try:
            sftp.put(str(script), remote_name)
        finally:
            sftp.close()
    shell = node_shell(submit_command(connector.outputs, remote_name, args, docker), login)
    return stream_command(
        client, wrap(shell) if wrap else shell, sys.stdout.buffer, sys.stderr.buffer
    )
