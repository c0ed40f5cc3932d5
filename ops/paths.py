"""Where per-stack local state lives (pinned host keys, the ssh config block, the key file),
under infra.stack_config's state folder; and the checks of local paths a task will write."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from infra.stack_config import state_base, writable_folder
from ops.errors import OpsError


def state_dir(stack: str) -> Path:
    """`.ray-gcp/<stack>/` in the project (git-ignored), or under $RAY_GCP_STATE_DIR: 0700
    whatever it was (it holds the private key and the pins), and never a symlink."""
    path = state_base() / stack
    if path.is_symlink():
        raise OpsError(f"{path} is a symbolic link: the stack's key and pinned host keys live "
                       "there, so remove the link and run again")
    writable_folder(path).chmod(0o700)
    return path


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
