"""`rsync-up` through the system's rsync over OpenSSH (ops.remote.openssh), as Ray's own
`ray rsync-up` shells out to rsync: OpenSSH's speed for a large file, and rsync's one stream
for many small ones.

What is sent is still decided here, not by rsync's rules: the files and folders the walk of
ops.remote.sync_walk keeps (rsync_exclude, rsync_filter) go to rsync as `--files-from`, so the
filters mean exactly what they mean on the SFTP path. rsync then skips what is unchanged by
size and mtime (`--checksum`: by size and content, its -c), keeps modes and mtimes (-p -t),
sends a link to a file as the file (-L, as the SFTP path reads through it) and deletes
nothing. The destination's folder is made first (`mkdir -p`, in --rsync-path). A node
without rsync raises NoRemoteRsync, and that node is served over SFTP instead.
"""

from __future__ import annotations

import posixpath
import shlex
import subprocess
import threading
from pathlib import Path

from ops.errors import OpsError
from ops.remote.openssh import OpenSsh
from ops.remote.progress import Transfers
from ops.remote.sync_walk import SyncReport, remote_path, walk_filtered
from ops.stack import Node

NO_RSYNC = "ray-gcp: no rsync on the node"
STDERR_LINES = 5  # enough to say why rsync failed


class NoRemoteRsync(OpsError):
    """The node has no rsync to receive with."""


def rsync_path(directory: str) -> str:
    """The remote side: rsync, after the destination folder exists (a missing rsync said
    so with NO_RSYNC, which the caller falls back on)."""
    folder = shlex.quote(posixpath.normpath(directory or "."))
    return (f"{{ command -v rsync >/dev/null 2>&1 || {{ echo '{NO_RSYNC}' >&2; exit 1; }}; }}"
            f" && mkdir -p -- {folder} && rsync")


def send(openssh: OpenSsh, rsync: str, node: Node, local: Path, destination: str,
         excludes: list[str], filters: list[str], checksum: bool,
         progress: Transfers | None) -> SyncReport:
    """Local `local` (file or folder) -> `destination` on `node`, as ops.remote.sync's
    sync_up sends it."""
    from infra.sync_filter import DirMergeFilters

    destination = remote_path(destination)
    host, options = openssh.target(node)
    if local.is_file():
        folder = destination if destination.endswith("/") else posixpath.dirname(destination)
        listed = [local.name]
        names: list[str] = []
        source, target = str(local), destination
    else:
        folder = destination
        names = []
        for relative_dir, _, subdirs, files in walk_filtered(local, excludes,
                                                             DirMergeFilters(filters)):
            names += [posixpath.join(relative_dir, name) for name in subdirs]
            names += [posixpath.join(relative_dir, name) for name in files]
        listed = [name for name in names if not (local / name).is_dir()]
        source, target = f"{local}/", f"{destination.rstrip('/') or '.'}/"
    command = [
        rsync, "--protect-args", "--times", "--perms", "--copy-links", "--whole-file",
        "--inplace", "--out-format=%l %n",
        "--rsh", shlex.join([openssh.ssh, *options]),
        "--rsync-path", rsync_path(folder),
        *(["--checksum"] if checksum else []),
        *(["--files-from=-", "--from0"] if not local.is_file() else []),
        source, f"{host}:{target}",
    ]
    report = SyncReport()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    writer = threading.Thread(target=_write_names, args=(process, names), daemon=True)
    writer.start()
    errors: list[bytes] = []
    reader = threading.Thread(target=_keep_tail, args=(process, errors), daemon=True)
    reader.start()
    for line in process.stdout:
        size, _, name = line.decode(errors="replace").rstrip("\n").partition(" ")
        if not name or name.endswith("/"):
            continue  # a folder made or touched, not a file sent
        report.sent.append(name)
        if progress is not None:
            progress.add_bytes(int(size) if size.isdigit() else 0)
            progress.add_file(name)
    status = process.wait()
    writer.join()
    reader.join()
    said = [line.decode(errors="replace").strip() for line in errors if line.strip()]
    if status != 0:
        if any(NO_RSYNC in line for line in said):
            raise NoRemoteRsync(f"{node.name} has no rsync")
        hint = (" (the node's host key is not the one pinned: refusing to transfer)"
                if any("Host key verification failed" in line for line in said) else "")
        raise OpsError(f"rsync to {node.name} failed (exit {status}){hint}: "
                       f"{' / '.join(said[-STDERR_LINES:]) or 'no message'}")
    report.unchanged = len(listed) - len(report.sent)
    return report


def _write_names(process: subprocess.Popen, names: list[str]) -> None:
    try:
        process.stdin.write(b"".join(name.encode(errors="surrogateescape") + b"\0"
                                     for name in names))
        process.stdin.close()
    except BrokenPipeError:
        pass  # rsync ended early; its status and stderr say why


def _keep_tail(process: subprocess.Popen, errors: list[bytes]) -> None:
    for line in process.stderr:
        errors.append(line)
        del errors[:-50]
