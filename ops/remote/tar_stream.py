"""`rsync-up` as one tar stream over the system's OpenSSH (ops.remote.openssh): OpenSSH's
speed for a large file (no per-block protocol of ours or rsync's between the file and the
cipher) and one stream for many small ones (no round trip per file).

One ssh run per node and source, over OpenSSH's warm master when there is one, started
before the local walk so its connection overlaps it. The sh loop on the node (tar_session)
answers, in turn:
1. `stat`: what the node has of the names the walk keeps (ops.remote.sync_walk: rsync_exclude
   and the rsync_filter files, so the filters mean exactly what they mean on the SFTP path),
   one `stat` for them all; `--checksum` adds `sum`, one `sha256sum` of the files whose size
   is the same. A file the same size and mtime (or, with `--checksum`, the same size and
   content) is unchanged and stays out of the stream; so does a folder already there.
2. `send`: what is left as one tar (written here by Python's tarfile, read there by tar):
   files as files (a link to a file as the file it names, a link to a folder as an empty
   folder, as the walk lists them), with their modes and mtimes, owned by whoever logs in
   (`--no-same-owner`), replacing what is there (a link there is replaced, not followed);
   folders already on the node keep their modes and times (`--no-overwrite-dir`), and
   nothing is deleted. Nothing to send: no stream.
The requests and the loop that answers them are ops.remote.tar_session's; a node without
GNU tar raises NoRemoteTar there and is served over SFTP instead. The node's key is checked
by ssh against exactly its pin, before anything is sent.
"""

from __future__ import annotations

import posixpath
import stat
from dataclasses import dataclass
from pathlib import Path

from model.sync_filter import DirMergeFilters
from ops.remote.openssh import OpenSsh
from ops.remote.progress import Transfers
from ops.remote.sync_walk import SyncReport, remote_path, same_content, walk_filtered
from ops.remote.tar_session import NodeEnded, Session
from ops.remote.tar_writer import Candidate, write_tar
from ops.stack import Node


@dataclass(frozen=True)
class RemoteEntry:
    mode: int
    size: int
    mtime: int


def send(openssh: OpenSsh, node: Node, local: Path, destination: str, excludes: list[str],
         filters: list[str], checksum: bool, progress: Transfers | None,
         copy_links: bool = False) -> SyncReport:
    """Local `local` (file or folder) -> `destination` on `node`, as ops.remote.sync's
    sync_up sends it (a link leading outside the folder left out unless `copy_links`)."""
    left_out: list[str] = []
    destination = remote_path(destination)
    root = None if local.is_file() else local  # the local folder the names are under
    with Session(openssh, node, "sending to") as session:
        if root is None:
            folder, candidates, there = _file_target(session, local, destination)
        else:
            folder = destination.rstrip("/") or "."
            candidates = _walk(local, excludes, DirMergeFilters(filters),
                               None if copy_links else left_out)
            there = _stats(session, folder, [candidate.name for candidate in candidates])
        files = [candidate for candidate in candidates if not candidate.is_folder]
        if checksum:  # rsync's -c: a file the same size is judged by its content alone
            same_size = {candidate.name: candidate.local for candidate in files
                         if _same(candidate, there.get(candidate.name), mtime=False)}
            alike = _same_content(session, folder, same_size) if same_size else set()
        else:
            alike = {candidate.name for candidate in files
                     if _same(candidate, there.get(candidate.name), mtime=True)}
        chosen = [candidate for candidate in candidates
                  if (not candidate.is_folder and candidate.name not in alike)
                  or (candidate.is_folder and not _is_folder(there.get(candidate.name)))]
        report = SyncReport(unchanged=len(alike), refused=left_out)
        if chosen:
            _stream(session, folder, root, chosen, progress)
            report.sent = [candidate.name for candidate in chosen if not candidate.is_folder]
    return report


def _file_target(session: Session, local: Path, destination: str
                 ) -> tuple[str, list[Candidate], dict[str, RemoteEntry]]:
    """(the folder the file goes to, [the file under its name there], what the node has of
    that name): into `destination` when it ends with `/` or is a folder on the node, else as
    `destination` itself. One request asks for both."""
    inside = posixpath.join(destination, local.name)
    there = _stats(session, ".", [inside] if destination.endswith("/")
                          else [destination, inside])
    target = inside if destination.endswith("/") or _is_folder(there.get(destination)) \
        else destination
    name = posixpath.basename(target)
    found = {name: there[target]} if target in there else {}
    return posixpath.dirname(target) or ".", [Candidate(name, local, False)], found


def _walk(local: Path, excludes: list[str], merge: DirMergeFilters,
          left_out: list[str] | None) -> list[Candidate]:
    """Every folder and file under `local` the filters keep, folders before what is in
    them (links leading outside named in `left_out` instead, unless it is None)."""
    candidates: list[Candidate] = []
    for relative_dir, directory, subdirs, files in walk_filtered(local, excludes, merge,
                                                                 left_out):
        candidates += [Candidate(posixpath.join(relative_dir, name), directory / name, True)
                       for name in subdirs]
        candidates += [Candidate(posixpath.join(relative_dir, name), directory / name, False)
                       for name in files]
    return candidates


def _is_folder(remote: RemoteEntry | None) -> bool:
    return remote is not None and stat.S_ISDIR(remote.mode)


def _same(candidate: Candidate, remote: RemoteEntry | None, mtime: bool) -> bool:
    """A regular file on the node of the same size and (with `mtime`) the same mtime in
    whole seconds, as the SFTP path judges it."""
    if remote is None or not stat.S_ISREG(remote.mode):
        return False
    st = candidate.st()
    return st.st_size == remote.size and (not mtime or int(st.st_mtime) == remote.mtime)


def _stats(session: Session, folder: str, names: list[str]) -> dict[str, RemoteEntry]:
    """What the node has of `names` in `folder` (nothing when the folder is not there yet)."""
    entries: dict[str, RemoteEntry] = {}
    prefix = "" if folder == "." else folder.rstrip("/") + "/"
    for record in session.ask("stat", [prefix + name for name in names]):
        mode, size, mtime, path = (record.split(b" ", 3) + [b"", b"", b""])[:4]
        try:
            entry = RemoteEntry(int(mode, 16), int(size), int(mtime))
        except ValueError:
            continue  # not a record stat wrote
        entries[path.decode(errors="surrogateescape")[len(prefix):]] = entry
    return entries


def _same_content(session: Session, folder: str, files: dict[str, Path]) -> set[str]:
    """The names among `files` whose copy in `folder` on the node has the same SHA-256; one
    the node cannot read counts as changed."""
    prefix = "" if folder == "." else folder.rstrip("/") + "/"
    return same_content(files, session.ask("sum", [prefix + name for name in files]), prefix)


def _stream(session: Session, folder: str, root: Path | None, entries: list[Candidate],
            progress: Transfers | None) -> None:
    """`entries` (under the local folder `root`, when they are) as one tar unpacked in
    `folder` (made when missing); the last request."""
    session.request("send", folder.encode(errors="surrogateescape"))
    try:
        write_tar(session.stdin, root, entries, progress)
    except BrokenPipeError:
        raise NodeEnded from None
