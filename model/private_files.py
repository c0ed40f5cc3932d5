"""Private local state: the one way this program makes a folder or writes a file in its state
folder (`.ray-gcp/`, or $RAY_GCP_STATE_DIR), which holds the file_mounts archive (the user's
mounted secrets), the stacks' keys, pins, tokens and outputs. A folder is 0700, made so and
tightened on every use (an older checkout made them 0755); a file is 0600 from its creation and
whole or not at all (written beside its place, renamed in). Neither follows a link planted in
the last name's place. No pydantic or pulumi here: `invoke exec` goes through it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def private_folder(path: Path) -> Path:
    """`path`, made 0700 with every missing folder above it, and tightened to 0700 when it is
    ours; never a shared folder with the sticky bit (such as /tmp), one everyone may write
    (someone else may have put things there: ops.paths refuses it, naming the fix), nor
    through a link. An OSError when it cannot be made."""
    missing: list[Path] = []
    current = path
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=FOLDER_MODE)
    if path.is_symlink():
        return path  # not tightened through it: the callers that keep secrets refuse it
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                         | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(descriptor)
        if info.st_uid == os.getuid() and not info.st_mode & (stat.S_ISVTX | stat.S_IWOTH) \
                and stat.S_IMODE(info.st_mode) != FOLDER_MODE:
            os.fchmod(descriptor, FOLDER_MODE)
    finally:
        os.close(descriptor)
    return path


def write_private_file(path: Path, data: bytes | str) -> Path:
    """`path` holding `data`, 0600 from its creation, whole or not at all: written to a new
    file beside it, then renamed over it (a link in its place is replaced, never followed)."""
    content = data.encode() if isinstance(data, str) else data
    descriptor, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(content)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    return path
