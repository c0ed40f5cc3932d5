"""Where this checkout keeps local state: `.ray-gcp/` in the project (git-ignored), or the
folder $RAY_GCP_STATE_DIR names. `ops` keeps each stack's pinned host keys and key file there,
`bootstrap.local_cluster` its record of running local clusters.
"""

from __future__ import annotations

import os
from pathlib import Path

# infra/ sits in the project root (as infra.stack_config says; not imported: `invoke exec`
# reads this and must not pay for YAML parsing).
PROJECT_ROOT = Path(__file__).resolve().parents[1]
STATE_DIR_ENV = "RAY_GCP_STATE_DIR"


class StateDirError(Exception):
    """The state folder cannot be made; the message names it and the variable that moves it."""


def state_base() -> Path:
    return Path(os.environ.get(STATE_DIR_ENV) or PROJECT_ROOT / ".ray-gcp")


def writable_folder(path: Path) -> Path:
    """`path`, created (private) when missing; one line naming it and $RAY_GCP_STATE_DIR when
    it cannot be."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise StateDirError(f"cannot create {path} ({exc.strerror}): set {STATE_DIR_ENV} to a "
                            "writable folder") from None
    return path
