"""`invoke monitor`: follow the autoscaler's log on the head, as `ray monitor` does."""

from __future__ import annotations

import shlex
import sys
from typing import BinaryIO

from ops.errors import OpsError
from ops.remote.commands import in_container, node_shell, run_captured, stream_command
from ops.remote.ssh import Connector, connect_stack

MONITOR_LOGS = "/tmp/ray/session_latest/logs/monitor*"  # Ray's monitor_cluster tails these


def monitor(connector: Connector, lines: int = 100, logs: str = "", follow: bool = True,
            out: BinaryIO | None = None) -> int:
    """`tail -n LINES [-f]` of the monitor logs on the head (in the container with docker)."""
    if lines < 0:
        raise OpsError(f"--lines {lines}: give a count of 0 or more")
    pattern = logs or MONITOR_LOGS
    directory, _, glob = pattern.rpartition("/")
    # Only the directory is quoted: the glob must expand on the head.
    found = f"ls {shlex.quote(directory)}/{glob} >/dev/null 2>&1"
    tail = f"tail -n {lines} {'-f ' if follow else ''}{shlex.quote(directory)}/{glob}"
    container = connector.outputs.docker_container_name
    if container:
        found, tail = in_container(found, container), in_container(tail, container)
    client = connector.head()
    if run_captured(client, found)[0] != 0:
        raise OpsError(f"the head has no autoscaler log {pattern}: Ray is not running there "
                       "yet (see `invoke status`)")
    output = out or sys.stdout.buffer
    return stream_command(client, node_shell(tail), output, sys.stderr.buffer)


def monitor_stack(stack: str | None, lines: int, trust_first_use: bool = False) -> int:
    """`invoke monitor`: follow the head's autoscaler log until Ctrl-C; the exit status."""
    with connect_stack(stack, trust_first_use) as connector:
        return monitor(connector, lines)
