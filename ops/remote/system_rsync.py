"""`rsync-up` through the system's rsync over OpenSSH (ops.remote.openssh), as Ray's own
`ray rsync-up` shells out to rsync: OpenSSH's speed for a large file, and rsync's one stream
for many small ones.

What is sent is still decided here, not by rsync's rules: what the walk of
ops.remote.sync_walk leaves out (rsync_exclude, rsync_filter) goes to rsync as anchored
excludes of those very names (or, for names rsync would read as patterns, the kept files as
`--files-from`), so the filters mean exactly what they mean on the SFTP path. rsync then
skips what is unchanged by size and mtime (`--checksum`: by size and content, its -c), keeps
modes and mtimes (-p -t), sends a link to a file as the file (-L, as the SFTP path reads
through it), writes in place as SFTP does (--inplace, whole files) and deletes nothing. The
destination's folder is made first (`mkdir -p`, in --rsync-path). A node without rsync
raises NoRemoteRsync, and that node is served over SFTP instead.
"""

from __future__ import annotations

import os
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
    destination = remote_path(destination)
    host, options = openssh.target(node)
    if local.is_file():
        folder = destination if destination.endswith("/") else posixpath.dirname(destination)
        listed, stdin, selection = [local.name], [], []
        source, target = str(local), destination
    else:
        folder = destination
        listed, stdin, selection = _selection(local, excludes, filters)
        source, target = f"{local}/", f"{destination.rstrip('/') or '.'}/"
    command = [
        rsync, "--protect-args", "--times", "--perms", "--copy-links", "--whole-file",
        "--inplace", "--out-format=%l %n",
        "--rsh", shlex.join([openssh.ssh, *options]),
        "--rsync-path", rsync_path(folder),
        *(["--checksum"] if checksum else []), *selection,
        source, f"{host}:{target}",
    ]
    report = SyncReport()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    end = b"\0" if "--from0" in selection else b"\n"
    writer = threading.Thread(target=_write_names, args=(process, stdin, end), daemon=True)
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


def _selection(local: Path, excludes: list[str], filters: list[str]
               ) -> tuple[list[str], list[str], list[str]]:
    """(the files the walk keeps, what rsync reads on stdin, the options that make it read
    it) for the folder `local`. rsync walks the folder itself (-r) leaving out, anchored,
    every name the walk left out and the inside of every link to a folder (the walk makes it
    a folder and does not enter it): its own walk is faster than a list of every file. A
    name rsync would read as a pattern (`*?[\\`), or could not read one a line (a line
    break, trailing blanks), makes it take the list of every kept file and folder instead
    (--files-from, NUL-separated)."""
    from infra.sync_filter import DirMergeFilters

    listed: list[str] = []
    kept_folders: list[str] = []
    left_out: list[str] = []
    plain = True
    for relative_dir, directory, subdirs, files in walk_filtered(local, excludes,
                                                                 DirMergeFilters(filters)):
        listed += [posixpath.join(relative_dir, name) for name in files]
        kept_folders += [posixpath.join(relative_dir, name) for name in subdirs]
        kept = set(subdirs) | set(files)
        present = sorted(os.listdir(directory))
        plain = plain and all(_plain(name) for name in present)
        left_out += [f"/{posixpath.join(relative_dir, name)}"
                     for name in present if name not in kept]
        left_out += [f"/{posixpath.join(relative_dir, name)}/*" for name in subdirs
                     if (directory / name).is_symlink()]
    if not plain:
        return listed, [*kept_folders, *listed], ["--files-from=-", "--from0"]
    return listed, left_out, ["--recursive", "--exclude-from=-"]


def _plain(name: str) -> bool:
    """A name rsync reads as itself in an exclude line: no wildcard, no backslash, no line
    break, no trailing blank."""
    return not any(mark in name for mark in "*?[\\\n\r") and name == name.rstrip()


def _write_names(process: subprocess.Popen, names: list[str], end: bytes) -> None:
    try:
        process.stdin.write(b"".join(name.encode(errors="surrogateescape") + end
                                     for name in names))
        process.stdin.close()
    except BrokenPipeError:
        pass  # rsync ended early; its status and stderr say why


def _keep_tail(process: subprocess.Popen, errors: list[bytes]) -> None:
    for line in process.stderr:
        errors.append(line)
        del errors[:-50]
