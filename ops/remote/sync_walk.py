"""What a sync sends, whichever way it goes (SFTP in ops.remote.sync, the tar stream over
OpenSSH in ops.remote.tar_stream): the folders and files under a source that rsync_exclude and the
rsync_filter files keep (model.sync_filter), which files the node has with the same content
(--checksum), the remote path as the login's home sees it, and the report of what moved."""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from model.sync_filter import DirMergeFilters, is_excluded


@dataclass
class SyncReport:
    sent: list[str] = field(default_factory=list)  # relative paths actually transferred
    unchanged: int = 0
    refused: list[str] = field(default_factory=list)  # one line per entry left out, and why

    def summary(self) -> str:
        left_out = f", {len(self.refused)} left out" if self.refused else ""
        return f"{len(self.sent)} file(s) sent, {self.unchanged} unchanged{left_out}"


def same_content(files: dict[str, Path], sums: Iterable[bytes], prefix: str = "") -> set[str]:
    """The names among `files` ({name: local path}) whose record in the node's `sha256sum -z`
    output `sums` (each path written as `prefix` + name) is the local file's SHA-256; a file
    the node did not hash counts as changed (--checksum, whichever way the sync goes)."""
    remote: dict[str, str] = {}
    for record in sums:
        digest, _, path = record.partition(b"  ")
        if path:
            remote[path.decode(errors="surrogateescape")[len(prefix):]] = digest.decode(
                errors="replace")
    return {name for name, local in files.items() if remote.get(name) == _sha256(local)}


def _sha256(path: Path) -> str:
    with path.open("rb") as source:
        return hashlib.file_digest(source, "sha256").hexdigest()


def remote_path(path: str) -> str:
    """SFTP paths are relative to the login's home, so `~/x` becomes `x`."""
    if path in ("~", "~/"):
        return "."
    if path.startswith("~/"):
        return path[2:]
    return path


def _read_local(directory: Path) -> Callable[[str], str | None]:
    def read(name: str) -> str | None:
        try:
            return (directory / name).read_text(errors="replace")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    return read


def walk_filtered(source: Path, excludes: list[str], merge: DirMergeFilters,
                  left_out: list[str] | None = None
                  ) -> Iterator[tuple[str, Path, list[str], list[str]]]:
    """The folders under `source` the filters keep, top down: (its path relative to `source`,
    "" at the top; its local path; its kept subfolders; its kept files), names sorted. A
    link to a folder is listed as a folder and not walked into; a link to a file as a file.
    Given `left_out`, a link that leads outside `source` (`creds -> ~/.aws/credentials`) is
    not listed but named there, as rsync -a would never send what it names (None: every link
    followed, rsync's --copy-links)."""
    inside = os.path.realpath(source)
    for directory, subdirs, files in os.walk(source):
        relative_dir = Path(directory).relative_to(source).as_posix()
        relative_dir = "" if relative_dir == "." else relative_dir
        if merge:
            merge.load(relative_dir, _read_local(Path(directory)))
        subdirs[:] = sorted(
            name for name in subdirs
            if not is_excluded(posixpath.join(relative_dir, name), excludes)
            and not merge.excluded(posixpath.join(relative_dir, name), is_dir=True)
            and _stays_inside(directory, name, inside, relative_dir, left_out)
        )
        kept = [name for name in sorted(files)
                if not is_excluded(posixpath.join(relative_dir, name), excludes)
                and not merge.excluded(posixpath.join(relative_dir, name), is_dir=False)
                and _stays_inside(directory, name, inside, relative_dir, left_out)]
        yield relative_dir, Path(directory), list(subdirs), kept


def _stays_inside(directory: str, name: str, inside: str, relative_dir: str,
                  left_out: list[str] | None) -> bool:
    """Whether `name` may be sent: not a link, or one whose whole chain ends inside the
    synced folder `inside` (its real path), or any link when `left_out` is None."""
    path = os.path.join(directory, name)
    if left_out is None or not os.path.islink(path):
        return True
    real = os.path.realpath(path)
    if real == inside or real.startswith(inside.rstrip("/") + "/"):
        return True
    left_out.append(f"{posixpath.join(relative_dir, name)!r}: it links to {os.readlink(path)!r}, "
                    "outside the folder sent (pass --copy-links to send what it names)")
    return False
