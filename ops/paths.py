"""Where per-stack local state lives (pinned host keys, the ssh config block, the key file),
under infra.stack_config's state folder; and the checks of local paths a task will write."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from infra.stack_config import STATE_DIR_ENV, state_base, writable_folder
from ops.errors import OpsError


def state_dir(stack: str) -> Path:
    """`.ray-gcp/<stack>/` in the project (git-ignored), or under $RAY_GCP_STATE_DIR: 0700
    whatever it was (it holds the private key and the pins), never a symlink, and ours.

    The folder is opened once with O_NOFOLLOW and checked and tightened through that
    descriptor (fstat, fchmod), so a link swapped in after a check is never followed; its
    parent must be ours (or root's) and not writable by everyone without the sticky bit, or
    someone else could swap the folder itself."""
    base = writable_folder(state_base())
    path = base / stack
    _check_parent(base)
    writable_folder(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        if path.is_symlink():
            raise OpsError(f"{path} is a symbolic link: the stack's key and pinned host keys "
                           "live there, so remove the link and run again") from None
        raise OpsError(f"cannot open {path} ({exc.strerror})") from None
    try:
        owner = os.fstat(descriptor).st_uid
        if owner != os.getuid():
            raise OpsError(f"{path} belongs to user id {owner}, not to you: the stack's key "
                           f"and pinned host keys live there; remove it or set {STATE_DIR_ENV} "
                           "to a folder of your own")
        os.fchmod(descriptor, 0o700)
    finally:
        os.close(descriptor)
    return path


def _check_parent(base: Path) -> None:
    """The state folders' parent may only be changed by us (or root)."""
    info = base.stat()
    if info.st_uid not in (os.getuid(), 0):
        raise OpsError(f"{base} belongs to user id {info.st_uid}: set {STATE_DIR_ENV} to a "
                       "folder of your own")
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        raise OpsError(f"{base} is writable by everyone: make it `chmod o-w` or set "
                       f"{STATE_DIR_ENV} to a folder of your own")


def known_hosts_path(stack: str) -> Path:
    return state_dir(stack) / "known_hosts"


@contextlib.contextmanager
def open_no_follow(path: Path, flags: int, mode: int = 0o600) -> Iterator[BinaryIO]:
    """Open a key or pin file without following a symlink planted in its place (a link would
    send the private key, or the trust decisions, wherever it points)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:
        if path.is_symlink():
            raise OpsError(f"{path} is a symbolic link: refusing to open it (it would lead "
                           "elsewhere); remove it and run again") from None
        raise OpsError(f"cannot open {path}: {exc.strerror}") from None
    writes = flags & (os.O_WRONLY | os.O_RDWR)
    with os.fdopen(fd, ("ab" if flags & os.O_APPEND else "wb") if writes else "rb") as handle:
        yield handle


def in_existing_folder(path: str, flag: str) -> Path:
    """A local path a task will write (`--output`, a download's target), checked before any
    slow work: its folder must exist."""
    chosen = Path(path).expanduser()
    if not chosen.absolute().parent.is_dir():
        raise OpsError(f"{flag} {path}: its folder does not exist: create it first")
    return chosen
