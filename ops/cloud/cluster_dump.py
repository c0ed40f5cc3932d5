"""`invoke cluster-dump`: Ray's logs and debug state from every node in one local archive.

Like `ray cluster-dump`: per node the session's logs (or only its `debug_state*.txt`), `pip
freeze`, the process list and the bootstrap log's tail, streamed over SSH as a tar.gz (no copy
on the node's disk) while a progress bar counts nodes and bytes. The archive holds one folder
per node; a node that cannot be reached is named on stderr and the rest is still written.
"""

from __future__ import annotations

import shlex
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TextIO

from ops.cloud.bootstrap_status import BOOTSTRAP_LOG
from ops.errors import OpsError
from ops.remote.commands import in_container, node_shell
from ops.remote.progress import ProgressBar
from ops.remote.ssh import Connector, connect_stack
from ops.stack import Node

SESSION_DIR = "/tmp/ray/session_latest"  # where Ray keeps the current session's logs
_CHUNK = 65536


@dataclass(frozen=True)
class DumpParts:
    logs: bool = True
    debug_state: bool = True
    pip: bool = True
    processes: bool = True
    processes_verbose: bool = True


def default_output(now: datetime | None = None) -> Path:
    """Ray's name for it: collected_logs_<date>_<time>.tar.gz in the working directory."""
    return Path(f"collected_logs_{(now or datetime.now()):%Y-%m-%d_%H-%M-%S}.tar.gz")


def collect_command(parts: DumpParts, session_dir: str = "", log_file: str = "") -> str:
    """Shell that writes the node's dump as tar.gz on stdout."""
    session = shlex.quote(session_dir or SESSION_DIR)
    lines = ['work=$(mktemp -d) || exit 1', "trap 'rm -rf \"$work\"' EXIT", 'set --']
    if parts.processes:
        ps = "ps auxww" if parts.processes_verbose else "ps aux"
        lines.append(f'{ps} > "$work/processes.txt" 2>&1; set -- "$@" processes.txt')
    if parts.pip:
        lines.append('{ python -m pip freeze || python3 -m pip freeze; } > "$work/pip_packages.txt"'
                     ' 2>&1; set -- "$@" pip_packages.txt')
    bootstrap_log = shlex.quote(log_file or BOOTSTRAP_LOG)
    lines.append(f'tail -n 2000 {bootstrap_log} > "$work/ray-bootstrap.log" 2>&1;'
                 ' set -- "$@" ray-bootstrap.log')
    if parts.logs:
        lines.append(f'[ -d {session}/logs ] && set -- "$@" -C "$(readlink -f {session})" logs')
    elif parts.debug_state:
        lines.append(f'for f in {session}/logs/debug_state*.txt; do [ -f "$f" ] && '
                     'cp "$f" "$work/" && set -- "$@" "$(basename "$f")"; done')
    lines.append('cd "$work" && tar czf - --ignore-failed-read "$@"')
    return "\n".join(lines)


def cluster_dump(connector: Connector, output: Path, parts: DumpParts, session_dir: str = "",
                 log_file: str = "", err: TextIO = sys.stderr) -> tuple[Path, list[str]]:
    """Write the archive; returns it and the nodes that could not be dumped."""
    nodes = list(connector.outputs.nodes)
    if not nodes:
        raise OpsError(f"stack {connector.outputs.stack!r} lists no nodes")
    command = collect_command(parts, session_dir, log_file)
    if connector.outputs.docker_container_name:
        command = in_container(command, connector.outputs.docker_container_name)
    connector.head()  # the jump host, connected (and pinned) before the threads need it
    bar = ProgressBar("cluster-dump", len(nodes), err)
    with tempfile.TemporaryDirectory(prefix="ray-cluster-dump-") as scratch:

        def fetch(node: Node) -> tuple[Node, Path | None, str]:
            part = Path(scratch) / f"{node.name}.tar.gz"
            try:
                _stream_to(connector, node, command, part, bar)
            except OpsError as exc:
                bar.step(f"{node.name} failed")
                return node, None, str(exc)
            bar.step(node.name)
            return node, part, ""

        with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
            results = list(pool.map(fetch, nodes))
        bar.close()
        failed = [f"{node.name}: {error}" for node, _, error in results if error]
        if len(failed) == len(nodes):
            raise OpsError("no node could be dumped: " + "; ".join(failed))
        with tarfile.open(output, "w:gz") as archive:
            for node, part, _ in results:
                if part is not None:
                    _add_node(archive, node.name, part)
    return output, failed


def _stream_to(connector: Connector, node: Node, command: str, part: Path,
               bar: ProgressBar) -> None:
    channel = connector.node(node).get_transport().open_session()
    errors = bytearray()
    try:
        channel.exec_command(node_shell(command))
        channel.shutdown_write()
        with part.open("wb") as sink:
            while data := channel.recv(_CHUNK):
                sink.write(data)
                bar.add_bytes(len(data))
                while channel.recv_stderr_ready():
                    errors += channel.recv_stderr(_CHUNK)
        while channel.recv_stderr_ready():
            errors += channel.recv_stderr(_CHUNK)
        status = channel.recv_exit_status()
    except OSError as exc:
        raise OpsError(f"the dump of {node.name} broke off: {exc}") from None
    finally:
        channel.close()
    if status != 0:
        detail = errors.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise OpsError(f"collecting on {node.name} exited {status}: {detail[0]}")


def _add_node(archive: tarfile.TarFile, name: str, part: Path) -> None:
    """Copy a node's tar.gz into the archive under `<node name>/`."""
    with tarfile.open(part, "r:gz") as source:
        for member in source:
            if not (member.isfile() or member.isdir()):
                continue
            data = source.extractfile(member) if member.isfile() else None
            member.name = f"{name}/{member.name.removeprefix('./')}".rstrip("/")
            archive.addfile(member, data)


def dump_stack(stack: str | None, output: str | None, parts: DumpParts) -> None:
    """`invoke cluster-dump`: write the archive (to `output`, else `default_output()`) and
    name what could not be collected."""
    with connect_stack(stack) as connector:
        archive, failed = cluster_dump(connector, Path(output) if output else default_output(),
                                       parts)
    for line in failed:
        print(f"warning: not in the archive: {line}")
    print(f"wrote {archive}")
