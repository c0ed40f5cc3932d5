"""Where per-stack local state lives (pinned host keys, the ssh config block, the key file),
under model.stack_config's state folder; the local pulumi backend and passphrase the stacks
`invoke up -c` creates use there; the outputs keeper's folder; and the checks of local paths a
task will write."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from model.private_files import write_private_file
from model.stack_config import STATE_DIR_ENV, state_base, writable_folder
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
    descriptor = _open_no_link(path, os.O_RDONLY | os.O_DIRECTORY,
                               "the stack's key and pinned host keys live there, so remove "
                               "the link and run again")
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


def own_stacks_dir() -> Path:
    """`stacks/` in the state folder: the stack files `up -c` writes (each naming its YAML), and
    the engine's copy of a repository stack's file (its encryption salt and worker counts), so
    no task writes to the files git tracks."""
    return state_base() / "stacks"


def state_root() -> Path:
    """The state folder itself (`.ray-gcp/`, or $RAY_GCP_STATE_DIR), created 0700 when missing,
    checked as `state_dir` checks a stack folder's parent."""
    base = writable_folder(state_base())
    _check_parent(base)
    return base


# Where the pulumi CLI reads a stack's backend and its secrets' passphrase from.
BACKEND_ENV = "PULUMI_BACKEND_URL"
PASSPHRASE_ENV = "PULUMI_CONFIG_PASSPHRASE"
PASSPHRASE_FILE_ENV = "PULUMI_CONFIG_PASSPHRASE_FILE"
SECRETS_PROVIDER_ENV = "RAY_GCP_SECRETS_PROVIDER"
"""The secrets provider the stacks a task creates are made with (ops.stacks.stack)."""

BACKEND_MARKER = "pulumi-backend"
"""In a stack's state folder: the stack lives in the local backend (`local_backend_url`)."""
PASSPHRASE_FILE = ".pulumi-passphrase"
"""In the state folder; a leading dot, which no cluster_name (so no stack `-c` makes) has."""


KEEPER_FOLDER = ".outputs-keeper"
"""In the state folder: the outputs keeper's socket (ops.stacks.outputs_keeper); a leading dot, as
no stack name has."""


def keeper_dir() -> Path:
    """The outputs keeper's folder, checked and made private exactly as a stack's folder is."""
    return state_dir(KEEPER_FOLDER)


def local_backend_url() -> str:
    """`file://<state folder>`: pulumi's file backend keeps its stacks in `<state folder>/.pulumi/`
    (made 0700 here first: the state holds the stacks' outputs and encrypted secrets)."""
    base = state_root()
    writable_folder(base / ".pulumi")
    return f"file://{base}"


def mark_local_backend(stack: str) -> None:
    write_private_file(state_dir(stack) / BACKEND_MARKER,
                       "stack created by `invoke up -c` in the file backend of this state folder\n")


def uses_local_backend(stack: str) -> bool:
    """Whether `mark_local_backend` marked `stack` (nothing is created to find out)."""
    return (state_base() / stack / BACKEND_MARKER).is_file()


def passphrase_file(create: bool) -> Path | None:
    """The passphrase pulumi encrypts the local stacks' secrets with, as a file for
    PULUMI_CONFIG_PASSPHRASE_FILE: random, generated once (with `create`, when missing), 0600,
    never read or shown here. None when there is none and `create` is false."""
    path = state_base() / PASSPHRASE_FILE
    if not os.path.lexists(path):
        if not create:
            return None
        write_new_file(path, secrets.token_urlsafe(32), 0o600, state_root())
    descriptor = _open_no_link(path, os.O_RDONLY,
                               "it holds the local stacks' passphrase, so remove the link (and "
                               "restore the file) and run again")
    try:
        info = os.fstat(descriptor)
        if info.st_uid != os.getuid() or not stat.S_ISREG(info.st_mode):
            raise OpsError(f"{path} is not a file of yours: it must hold the local stacks' "
                           f"passphrase; remove it or set {STATE_DIR_ENV} to a folder of your own")
        os.fchmod(descriptor, 0o600)
    finally:
        os.close(descriptor)
    return path


def write_new_file(path: Path, text: str, mode: int, folder: Path | None = None) -> bool:
    """Create `path` holding `text`, whole or not at all: written to a temporary file beside it,
    then linked into place, which never replaces a file already there (False then: someone
    else made it first, and theirs is kept)."""
    descriptor, staging = tempfile.mkstemp(dir=folder or path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(staging, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(staging)


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
    if writes:
        os.fchmod(fd, mode)  # a file an older version left readable is tightened too
    with os.fdopen(fd, ("ab" if flags & os.O_APPEND else "wb") if writes else "rb") as handle:
        yield handle


def in_existing_folder(path: str, flag: str) -> Path:
    """A local path a task will write (`--output`, a download's target), checked before any
    slow work: its folder must exist."""
    chosen = Path(path).expanduser()
    if not chosen.absolute().parent.is_dir():
        raise OpsError(f"{flag} {path}: its folder does not exist: create it first")
    return chosen


def _open_no_link(path: Path, flags: int, fix: str) -> int:
    """`path` opened without following a link (O_NOFOLLOW): a link is refused with `fix`."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW)
    except OSError as exc:
        if path.is_symlink():
            raise OpsError(f"{path} is a symbolic link: {fix}") from None
        raise OpsError(f"cannot open {path} ({exc.strerror})") from None
