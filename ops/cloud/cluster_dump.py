"""`invoke cluster-dump`: Ray's logs and debug state from every node in one local archive.

Like `ray cluster-dump`: per node the session's logs (or only its `debug_state*.txt`), `pip
freeze`, the process list and the bootstrap log's tail, streamed over SSH as a tar.gz (no copy
on the node's disk) while a progress bar counts nodes and bytes. The archive holds one folder
per node; a node that cannot be reached is named on stderr and the rest is still written.

What a node streams is untrusted (ops/remote/untrusted.py): each member's path is made relative
to its node's folder (an absolute one or one climbing out with `..` is refused, named on stderr, and
the rest goes on), only files and folders are kept, modes lose setuid/setgid/sticky, owners
become the user making the archive, the node's stderr is kept to its last 64 KB (read while the
archive streams), and the archive is 0600 (the logs may hold secrets). A node's archive that
breaks off, or holds a name or pax header past untrusted.py's cap, ends that node's part with
one line; what came before it is kept whole and the other nodes' parts follow.
"""

from __future__ import annotations

import gzip
import os
import shlex
import shutil
import sys
import tarfile
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, TextIO

from ops.cloud.bootstrap_status import BOOTSTRAP_LOG
from ops.errors import OpsError
from ops.remote.commands import in_container, node_shell
from ops.remote.eof import send_eof
from ops.remote.progress import ProgressBar
from ops.remote.ssh import Connector, connect_stack
from ops.remote.untrusted import (
    CappedHeaders,
    CappedTail,
    RefusedEntry,
    drain,
    drain_in_background,
    member_path,
    safe_mode,
)
from ops.stacks.stack import Node

SESSION_DIR = "/tmp/ray/session_latest"  # where Ray keeps the current session's logs
STDERR_CAP = 64 * 1024  # the end of a node's stderr, for the one line a failure shows
SPOOL_IN_MEMORY = 8 << 20  # bytes of one member held in memory before it spills to a file


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
    # The log is root's alone (0600): read it with sudo, as `invoke status` does.
    lines.append(f'{{ sudo -n tail -n 2000 {bootstrap_log} || tail -n 2000 {bootstrap_log}; }}'
                 ' > "$work/ray-bootstrap.log" 2>&1; set -- "$@" ray-bootstrap.log')
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
        with private_file(output) as sink, tarfile.open(fileobj=sink, mode="w:gz") as archive:
            for node, part, _ in results:
                if part is not None:
                    for refused in _add_node(archive, node.name, part):
                        print(f"cluster-dump: {node.name}: left out {refused}", file=err)
    return output, failed


def private_file(path: Path) -> BinaryIO:
    """`path` opened for writing, readable by its owner only, whatever it was before."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(descriptor, 0o600)
    return os.fdopen(descriptor, "wb")


def _stream_to(connector: Connector, node: Node, command: str, part: Path,
               bar: ProgressBar) -> None:
    channel = connector.node(node).get_transport().open_session()
    errors = CappedTail(STDERR_CAP)
    try:
        channel.exec_command(node_shell(command))
        send_eof(channel)
        stderr_reader = drain_in_background(channel.recv_stderr, errors.write)
        with part.open("wb") as sink:

            def write(data: bytes) -> None:
                sink.write(data)
                bar.add_bytes(len(data))

            drain(channel.recv, write)
        stderr_reader.join()
        status = channel.recv_exit_status()
    except OSError as exc:
        raise OpsError(f"the dump of {node.name} broke off: {exc}") from None
    finally:
        channel.close()
    if status != 0:
        detail = bytes(errors.kept).decode(errors="replace").strip().splitlines()[-1:] or [
            "no message"
        ]
        raise OpsError(f"collecting on {node.name} exited {status}: {detail[0]}")


def _add_node(archive: tarfile.TarFile, name: str, part: Path) -> list[str]:
    """Copy a node's tar.gz into the archive under `<node name>/`; returns what was left out,
    one line each (see the module docstring)."""
    refused: list[str] = []
    seen: set[str] = set()
    try:
        with tarfile.open(part, "r:gz", tarinfo=CappedHeaders) as source:
            for member in source:
                if not (member.isfile() or member.isdir()):
                    continue
                try:
                    relative = member_path(member.name)
                except RefusedEntry as exc:
                    refused.append(str(exc))
                    continue
                if relative in seen:
                    refused.append(f"{member.name!r} is listed twice")
                    continue
                seen.add(relative)
                # A file's data is read to its end before any of it is added: a node's
                # archive that breaks off mid-member must not leave a short member here.
                with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as data:
                    if member.isfile():
                        _copy_data(source, member, data)
                    member.name = f"{name}/{relative}".rstrip("/")
                    member.mode = safe_mode(member.mode)
                    member.uid, member.gid = os.getuid(), os.getgid()
                    member.uname = member.gname = ""
                    archive.addfile(member, data if member.isfile() else None)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as error:
        refused.append(f"the rest of its archive, which could not be read ({error})")
    return refused


def _copy_data(source: tarfile.TarFile, member: tarfile.TarInfo, data: BinaryIO) -> None:
    """A file member's data copied into `data`, which is then rewound."""
    extracted = source.extractfile(member)
    assert extracted is not None  # a file member has data
    shutil.copyfileobj(extracted, data)
    data.seek(0)


def dump_stack(stack: str | None, output: str | None, parts: DumpParts,
               trust_first_use: bool = False) -> None:
    """`invoke cluster-dump`: write the archive (to `output`, else `default_output()`) and
    name what could not be collected."""
    with connect_stack(stack, trust_first_use) as connector:
        archive, failed = cluster_dump(connector, Path(output) if output else default_output(),
                                       parts)
    for line in failed:
        print(f"warning: not in the archive: {line}")
    print(f"wrote {archive}")
