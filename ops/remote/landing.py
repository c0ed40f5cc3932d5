"""Where what `rsync-down` fetches lands on this machine, whichever way it came (SFTP in
ops.remote.sync, the tar stream over OpenSSH in ops.remote.tar_fetch), under untrusted.py's
rules: a file is written only at its own place in the destination, never through a link or
over a folder (O_NOFOLLOW), private while written, then the node's mode without special bits
and its times; a folder of the destination is a real folder (not a link, not a file); a link
is made again only when it points down inside its own folder. A broken rule is a
RefusedEntry naming the entry; the caller reports it and goes on."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ops.remote.untrusted import RefusedEntry, link_stays_inside, safe_mode


def unchanged(local: str | Path, size: int, mtime: float) -> bool:
    """Whether `local` is already the node's file: a file of its size and mtime in whole
    seconds, as rsync judges it. RefusedEntry when a link or a folder holds its place (it
    is never written through or over)."""
    try:
        st = os.lstat(local)
    except FileNotFoundError:
        return False
    except OSError as exc:  # a file where a folder should be, say
        raise RefusedEntry(f"{local} cannot be looked at ({exc.strerror})") from None
    if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
        kind = "link" if stat.S_ISLNK(st.st_mode) else "folder"
        raise RefusedEntry(f"{local} is a {kind} here: not written through or over")
    return st.st_size == size and int(st.st_mtime) == int(mtime)


def file_target(destination: Path, name: str) -> Path:
    """Where a single fetched file named `name` goes: into `destination` when it is a folder,
    else as `destination` itself (its folder made)."""
    target = destination / name if destination.is_dir() else destination
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def folder(path: Path) -> None:
    """A folder of the destination: made, or already a real folder (not a link, not a
    file)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise RefusedEntry(f"{path} is already there and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RefusedEntry(f"{path} cannot be made ({exc.strerror})") from None


def link(target: str, relative_dir: str, local: Path) -> None:
    """The node's link to `target`, made again at `local` (in `relative_dir` of the
    destination) when it points down inside its own folder; a link already there is
    replaced, anything else is left alone."""
    if ".." in target.split("/") or not link_stays_inside(relative_dir, target):
        raise RefusedEntry(f"it links to {target!r}, outside its folder")
    if local.is_symlink():
        local.unlink()
    elif local.exists():
        raise RefusedEntry(f"{local} is already there and is not a link")
    local.symlink_to(target)


@contextlib.contextmanager
def landed_file(local: str | Path, mode: int | None, mtime: float,
                atime: float | None = None) -> Iterator[BinaryIO]:
    """`local` itself opened for writing (never through a link there, never over a
    folder), private while written; on leaving, the node's `mode` without special bits and
    its times."""
    try:
        descriptor = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise RefusedEntry(f"{local} cannot be written ({exc.strerror})") from None
    with os.fdopen(descriptor, "wb") as sink:
        yield sink
        os.fchmod(sink.fileno(), safe_mode(mode))
    os.utime(local, (atime or mtime, mtime), follow_symlinks=False)

