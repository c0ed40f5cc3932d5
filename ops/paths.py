"""Where per-stack local state lives: pinned host keys, the ssh config block, the key file."""

from __future__ import annotations

import os
from pathlib import Path

# ops/ sits in the project root; computed here so importing it does not pull in infra (pydantic).
PROJECT_ROOT = Path(__file__).resolve().parents[1]
STATE_DIR_ENV = "RAY_GCP_STATE_DIR"


def state_dir(stack: str) -> Path:
    """`.ray-gcp/<stack>/` in the project (git-ignored), or under $RAY_GCP_STATE_DIR."""
    return writable_folder(state_base() / stack)


def state_base() -> Path:
    return Path(os.environ.get(STATE_DIR_ENV) or PROJECT_ROOT / ".ray-gcp")


def writable_folder(path: Path) -> Path:
    """`path`, created (private) when missing; one line naming it and $RAY_GCP_STATE_DIR when
    it cannot be."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        from ops.errors import OpsError

        raise OpsError(f"cannot create {path} ({exc.strerror}): set {STATE_DIR_ENV} to a "
                       "writable folder") from None
    return path


def known_hosts_path(stack: str) -> Path:
    return state_dir(stack) / "known_hosts"


def in_existing_folder(path: str, flag: str) -> Path:
    """A local path a task will write (`--output`, a download's target), checked before any
    slow work: its folder must exist."""
    from ops.errors import OpsError

    chosen = Path(path).expanduser()
    if not chosen.absolute().parent.is_dir():
        raise OpsError(f"{flag} {path}: its folder does not exist: create it first")
    return chosen
