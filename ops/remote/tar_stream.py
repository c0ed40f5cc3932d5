"""`rsync-up` as one tar stream over the system's OpenSSH (ops.remote.openssh): OpenSSH's
speed for a large file (no per-block protocol of ours or rsync's between the file and the
cipher) and one stream for many small ones (no round trip per file).

One ssh run per node and source, over OpenSSH's warm master when there is one, started
before the local walk so its connection overlaps it. A small sh loop on the node (SCRIPT)
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
Each request is a line `VERB BYTES` and that many bytes (NUL-separated paths, or the folder
to unpack in); each answer ends with a record `Z` (no stat or sha256sum record starts so).

A node without GNU tar (whose options the loop uses, as it uses GNU's stat, xargs, head and
sha256sum) raises NoRemoteTar and is served over SFTP instead. The node's key is
checked by ssh against exactly its pin, before anything is sent.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import stat
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from infra.sync_filter import DirMergeFilters
from ops.errors import OpsError
from ops.remote.openssh import OpenSsh
from ops.remote.progress import Transfers
from ops.remote.sync_walk import SyncReport, remote_path, same_content, walk_filtered
from ops.remote.tar_writer import Candidate, write_tar
from ops.remote.untrusted import CappedTail, drain_in_background
from ops.stack import Node

NO_TAR = "ray-gcp: no GNU tar on the node"
NO_TAR_STATUS = 3
STDERR_LINES = 5  # enough to say why the node refused
STDERR_CAP = 8192  # bytes of the node's stderr kept to say it from
STAT_FORMAT = "%f %s %Y %n\\0"  # raw mode (hex), size, mtime (s), the path as asked
ANSWER_END = b"Z\n"
SCRIPT = f"""case $(tar --version 2>/dev/null) in
  *"GNU tar"*) ;;
  *) echo '{NO_TAR}' >&2; exit {NO_TAR_STATUS} ;;
esac
while read -r verb size; do
  case $verb in
  stat) head -c "$size" | xargs -0r stat --printf '{STAT_FORMAT}' -- 2>/dev/null ;;
  sum) head -c "$size" | xargs -0r sha256sum -z -- 2>/dev/null ;;
  send) folder=$(head -c "$size"; echo x); folder=${{folder%x}}
    mkdir -p -- "$folder" && cd -- "$folder" &&
    exec tar -x -p --no-same-owner --no-overwrite-dir -f -
    exit 1 ;;
  *) exit 0 ;;
  esac
  printf 'Z\\n'
done"""


class NoRemoteTar(OpsError):
    """The node has no GNU tar to unpack with."""


@dataclass(frozen=True)
class RemoteEntry:
    mode: int
    size: int
    mtime: int


def send(openssh: OpenSsh, node: Node, local: Path, destination: str, excludes: list[str],
         filters: list[str], checksum: bool, progress: Transfers | None) -> SyncReport:
    """Local `local` (file or folder) -> `destination` on `node`, as ops.remote.sync's
    sync_up sends it."""
    destination = remote_path(destination)
    root = None if local.is_file() else local  # the local folder the names are under
    with _Session(openssh, node) as session:
        if root is None:
            folder, candidates, there = _file_target(session, local, destination)
        else:
            folder = destination.rstrip("/") or "."
            candidates = _walk(local, excludes, DirMergeFilters(filters))
            there = session.stats(folder, [candidate.name for candidate in candidates])
        files = [candidate for candidate in candidates if not candidate.is_folder]
        if checksum:  # rsync's -c: a file the same size is judged by its content alone
            same_size = {candidate.name: candidate.local for candidate in files
                         if _same(candidate, there.get(candidate.name), mtime=False)}
            alike = session.same_content(folder, same_size) if same_size else set()
        else:
            alike = {candidate.name for candidate in files
                     if _same(candidate, there.get(candidate.name), mtime=True)}
        chosen = [candidate for candidate in candidates
                  if (not candidate.is_folder and candidate.name not in alike)
                  or (candidate.is_folder and not _is_folder(there.get(candidate.name)))]
        report = SyncReport(unchanged=len(alike))
        if chosen:
            session.stream(folder, root, chosen, progress)
            report.sent = [candidate.name for candidate in chosen if not candidate.is_folder]
    return report


def _file_target(session: _Session, local: Path, destination: str
                 ) -> tuple[str, list[Candidate], dict[str, RemoteEntry]]:
    """(the folder the file goes to, [the file under its name there], what the node has of
    that name): into `destination` when it ends with `/` or is a folder on the node, else as
    `destination` itself. One request asks for both."""
    inside = posixpath.join(destination, local.name)
    there = session.stats(".", [inside] if destination.endswith("/")
                          else [destination, inside])
    target = inside if destination.endswith("/") or _is_folder(there.get(destination)) \
        else destination
    name = posixpath.basename(target)
    found = {name: there[target]} if target in there else {}
    return posixpath.dirname(target) or ".", [Candidate(name, local, False)], found


def _walk(local: Path, excludes: list[str], merge: DirMergeFilters) -> list[Candidate]:
    """Every folder and file under `local` the filters keep, folders before what is in
    them."""
    candidates: list[Candidate] = []
    for relative_dir, directory, subdirs, files in walk_filtered(local, excludes, merge):
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


class _Session:
    """SCRIPT running on one node (its pin checked, its warm master used), and the requests
    to it. Leaving the block ends it and raises what the node said if it failed."""

    def __init__(self, openssh: OpenSsh, node: Node) -> None:
        host, options = openssh.target(node)
        self.node = node
        self.process = subprocess.Popen([openssh.ssh, *options, host, SCRIPT],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self.errors = CappedTail(STDERR_CAP)
        self.stderr = drain_in_background(self.process.stderr.read1, self.errors.write)

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        ours = kind is not None and not issubclass(kind, _NodeEnded)
        if ours:  # refused here (a file that cannot be sent): the node gets nothing more
            self.process.kill()
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        status = self.process.wait()
        self.stderr.join()
        self.process.stdout.close()
        if not ours and (status != 0 or kind is not None):
            self._fail(status)

    def stats(self, folder: str, names: list[str]) -> dict[str, RemoteEntry]:
        """What the node has of `names` in `folder` (nothing when the folder is not there
        yet)."""
        entries: dict[str, RemoteEntry] = {}
        prefix = "" if folder == "." else folder.rstrip("/") + "/"
        for record in self._ask("stat", [prefix + name for name in names]):
            mode, size, mtime, path = (record.split(b" ", 3) + [b"", b"", b""])[:4]
            try:
                entry = RemoteEntry(int(mode, 16), int(size), int(mtime))
            except ValueError:
                continue  # not a record stat wrote
            entries[path.decode(errors="surrogateescape")[len(prefix):]] = entry
        return entries

    def same_content(self, folder: str, files: dict[str, Path]) -> set[str]:
        """The names among `files` whose copy in `folder` on the node has the same SHA-256;
        one the node cannot read counts as changed."""
        prefix = "" if folder == "." else folder.rstrip("/") + "/"
        return same_content(files, self._ask("sum", [prefix + name for name in files]), prefix)

    def stream(self, folder: str, root: Path | None, entries: list[Candidate],
               progress: Transfers | None) -> None:
        """`entries` (under the local folder `root`, when they are) as one tar unpacked in
        `folder` (made when missing); the last request."""
        self._request("send", folder.encode(errors="surrogateescape"))
        try:
            write_tar(self.process.stdin, root, entries, progress)
        except BrokenPipeError:
            raise _NodeEnded from None

    def _ask(self, verb: str, paths: list[str]) -> list[bytes]:
        """The NUL-separated records the node answers `verb` on `paths` with. The paths
        are written by a thread while the answer is read: neither side waits on a full
        pipe."""
        payload = b"".join(path.encode(errors="surrogateescape") + b"\0" for path in paths)
        writer = threading.Thread(target=self._request_quietly, args=(verb, payload))
        writer.start()
        answer = bytearray()
        while not (answer == ANSWER_END or answer.endswith(b"\0" + ANSWER_END)):
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                writer.join()
                raise _NodeEnded
            answer += chunk
        writer.join()
        return bytes(answer[:-len(ANSWER_END)]).split(b"\0")[:-1]

    def _request(self, verb: str, payload: bytes) -> None:
        try:
            self.process.stdin.write(f"{verb} {len(payload)}\n".encode() + payload)
            self.process.stdin.flush()
        except BrokenPipeError:
            raise _NodeEnded from None

    def _request_quietly(self, verb: str, payload: bytes) -> None:
        with contextlib.suppress(_NodeEnded):  # the reader sees the end and says so
            self._request(verb, payload)

    def _fail(self, status: int) -> None:
        said = [line.strip() for line in self.errors.text().splitlines() if line.strip()]
        if status == NO_TAR_STATUS and any(NO_TAR in line for line in said):
            raise NoRemoteTar(f"{self.node.name} has no GNU tar")
        hint = (" (the node's host key is not the one pinned: refusing to transfer)"
                if any("Host key verification failed" in line for line in said) else "")
        raise OpsError(f"sending to {self.node.name} failed (exit {status}){hint}: "
                       f"{' / '.join(said[-STDERR_LINES:]) or 'no message'}")


class _NodeEnded(Exception):
    """The node's side ended before its answer; its status and stderr say why."""
