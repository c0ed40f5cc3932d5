"""Where what `rsync-down` fetches lands on this machine, whichever way it came (SFTP in
ops.remote.sync, the tar stream over OpenSSH in ops.remote.tar_fetch and tar_unpack), under
untrusted.py's rules. Every place is given as the destination (the user's own folder, taken as
it is) and a path relative to it, and is reached through folder handles: each folder on the way
opened with O_NOFOLLOW | O_DIRECTORY from the one before (openat), so a link in the folders of
a name is never followed, whatever made it and whenever. A file is written only at its own
place, never through a link or over a folder, private while written, then the node's mode
without special bits and its times; a folder of the destination is a real folder (not a link,
not a file); a link is made again only when it points down inside its own folder. A broken rule
is a RefusedEntry naming the entry; the caller reports it and goes on.

`remove_tree` removes a private folder (rsync-down's staging) without following any link in it
and without changing a mode through one (tempfile.TemporaryDirectory's cleanup chmods through
links before Python 3.11.8, CVE-2023-6597)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ops.remote.untrusted import RefusedEntry, link_stays_inside, safe_mode

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def open_folder(root: int | str | Path, relative: str, make: bool = False) -> int:
    """A handle on the folder `relative` under `root` (a handle, or a path opened as given),
    each of its components opened with O_NOFOLLOW from the one before (made 0755 first with
    `make`); RefusedEntry when one is a link, not a folder, or cannot be opened. The caller
    closes it."""
    try:
        current = os.open(root, FOLDER_FLAGS & ~os.O_NOFOLLOW) if not isinstance(root, int) \
            else os.dup(root)
    except OSError as exc:
        raise RefusedEntry(f"{root} cannot be opened ({exc.strerror})") from None
    walked = ""
    try:
        for part in (part for part in relative.split("/") if part not in ("", ".")):
            if part == "..":
                raise RefusedEntry(f"{relative!r} leaves the destination")
            walked = os.path.join(walked, part)
            if make:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=current)
            try:
                following = os.open(part, FOLDER_FLAGS, dir_fd=current)
            except OSError as exc:
                raise RefusedEntry(_not_a_folder(current, part, walked, exc)) from None
            os.close(current)
            current = following
    except BaseException:
        os.close(current)
        raise
    return current


def _not_a_folder(folder_fd: int, part: str, walked: str, exc: OSError) -> str:
    """Why `part` in the folder could not be opened as a folder: a link (Linux says ENOTDIR
    for a link with O_DIRECTORY, others ELOOP or EMLINK), a file, or the system's word."""
    with contextlib.suppress(OSError):
        if stat.S_ISLNK(os.stat(part, dir_fd=folder_fd, follow_symlinks=False).st_mode):
            return f"{walked} is a link here: not followed"
    if exc.errno in (errno.ENOTDIR, errno.ELOOP, errno.EMLINK):
        return f"{walked} is already there and is not a folder"
    return f"{walked} cannot be opened ({exc.strerror})"


@contextlib.contextmanager
def parent_of(root: int | str | Path, relative: str,
              make: bool = False) -> Iterator[tuple[int, str]]:
    """(a handle on the folder of `relative` under `root`, its last name), as open_folder
    opens it."""
    folder, _, name = relative.rstrip("/").rpartition("/")
    if name in ("", ".", ".."):
        raise RefusedEntry(f"{relative!r} is not a file name")
    descriptor = open_folder(root, folder, make)
    try:
        yield descriptor, name
    finally:
        os.close(descriptor)


def unchanged(root: int | str | Path, relative: str, size: int, mtime: float) -> bool:
    """Whether `relative` under `root` is already the node's file: a file of its size and
    mtime in whole seconds, as rsync judges it. RefusedEntry when a link or a folder holds its
    place (it is never written through or over). `root` may be a handle on the folder, then
    a plain name is looked at through it, no handle opened per file (a fetch's walk)."""
    if isinstance(root, int) and "/" not in relative and relative not in ("", ".", ".."):
        st = _looked_at(root, relative, relative)
    else:
        with parent_of(root, relative) as (folder, name):
            st = _looked_at(folder, name, relative)
    if st is None:
        return False
    if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
        kind = "link" if stat.S_ISLNK(st.st_mode) else "folder"
        raise RefusedEntry(f"{relative} is a {kind} here: not written through or over")
    return st.st_size == size and int(st.st_mtime) == int(mtime)


def _looked_at(folder: int, name: str, relative: str) -> os.stat_result | None:
    """`name` in `folder`, links not followed; None when there is nothing."""
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RefusedEntry(f"{relative} cannot be looked at ({exc.strerror})") from None


def file_target(destination: Path, name: str) -> Path:
    """Where a single fetched file named `name` goes: into `destination` when it is a folder,
    else as `destination` itself (its folder made)."""
    target = destination / name if destination.is_dir() else destination
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def folder(root: Path, relative: str) -> int:
    """A folder of the destination, made or already a real folder (not a link, not a file):
    a handle on it, which the caller closes."""
    if not relative:
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RefusedEntry(f"{root} cannot be made ({exc.strerror})") from None
    return open_folder(root, relative, make=True)


class Folders:
    """Handles on the folders under one root (a handle), each opened once as open_folder
    opens it, all closed by `close`: many files of one folder cost one walk to it."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.handles: dict[str, int] = {}

    def __call__(self, relative_dir: str) -> int:
        if relative_dir not in self.handles:
            self.handles[relative_dir] = open_folder(self.root, relative_dir)
        return self.handles[relative_dir]

    def close(self) -> None:
        for handle in self.handles.values():
            os.close(handle)
        self.handles.clear()


def link(target: str, relative_dir: str, root: Path, relative: str) -> None:
    """The node's link to `target`, made again at `relative` under `root` (in `relative_dir`
    of the destination) when it points down inside its own folder; a link already there is
    replaced, anything else is left alone."""
    if ".." in target.split("/") or not link_stays_inside(relative_dir, target):
        raise RefusedEntry(f"it links to {target!r}, outside its folder")
    with parent_of(root, relative) as (folder_fd, name):
        try:
            st = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISLNK(st.st_mode):
            raise RefusedEntry(f"{relative} is already there and is not a link")
        if st is not None:
            os.unlink(name, dir_fd=folder_fd)
        os.symlink(target, name, dir_fd=folder_fd)


@contextlib.contextmanager
def landed_file(root: int | str | Path, relative: str, mode: int | None, mtime: float,
                atime: float | None = None) -> Iterator[BinaryIO]:
    """`relative` under `root` written whole or not at all: a private new file beside it
    (never through a link in its folders) takes the data, then the node's `mode` without
    special bits and its times, and is renamed over `relative` only once the block ends
    without an error (a link there is replaced, never followed; a folder there is refused).
    On an error the partial file is removed."""
    with parent_of(root, relative) as (folder_fd, name):
        partial = f".{name[:100]}.ray-gcp-{secrets.token_hex(4)}"
        try:
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                 | getattr(os, "O_CLOEXEC", 0), 0o600, dir_fd=folder_fd)
        except OSError as exc:
            raise RefusedEntry(f"{relative} cannot be written ({exc.strerror})") from None
        try:
            with os.fdopen(descriptor, "wb") as sink:
                yield sink
                sink.flush()
                os.fchmod(descriptor, safe_mode(mode))
                os.utime(descriptor, (atime or mtime, mtime))
            _replace(folder_fd, partial, name, relative)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial, dir_fd=folder_fd)
            raise


def _replace(folder_fd: int, partial: str, name: str, relative: str) -> None:
    """`partial` renamed over `name` in the folder, unless a folder holds that place."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISDIR(os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode):
            raise RefusedEntry(f"{relative} is a folder here: not written over")
    os.rename(partial, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)


def remove_tree(parent: int | str | Path, name: str) -> None:
    """`name` in `parent` and everything in it removed, links removed as links: each folder
    opened with O_NOFOLLOW from the one before, nothing chmodded, nothing followed. Works on
    any Python 3.11 (no shutil.rmtree's or TemporaryDirectory's fallbacks)."""
    with contextlib.ExitStack() as stack:
        at = parent if isinstance(parent, int) else os.open(parent, FOLDER_FLAGS & ~os.O_NOFOLLOW)
        if not isinstance(parent, int):
            stack.callback(os.close, at)
        _remove_entry(at, name)


def _remove_entry(folder_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=folder_fd)
        return
    except FileNotFoundError:
        return
    except (IsADirectoryError, PermissionError) as exc:  # Linux says EISDIR, others EPERM
        try:
            inner = os.open(name, FOLDER_FLAGS, dir_fd=folder_fd)
        except OSError:
            raise exc from None
    try:
        os.fchmod(inner, 0o700)  # the folder itself (its handle): one tar made unwritable
        for inner_name in os.listdir(inner):
            _remove_entry(inner, inner_name)
    finally:
        os.close(inner)
    os.rmdir(name, dir_fd=folder_fd)
