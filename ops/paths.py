"""Where per-stack local state lives: pinned host keys, the ssh config block, the key file."""

from __future__ import annotations

import os
from pathlib import Path

# ops/ sits in the project root; computed here so importing it does not pull in infra (pydantic).
PROJECT_ROOT = Path(__file__).resolve().parents[1]
STATE_DIR_ENV = "RAY_GCP_STATE_DIR"


def state_dir(stack: str) -> Path:
    """`.ray-gcp/<stack>/` in the project (git-ignored), or under $RAY_GCP_STATE_DIR."""
    base = Path(os.environ.get(STATE_DIR_ENV) or PROJECT_ROOT / ".ray-gcp")
    path = base / stack
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def known_hosts_path(stack: str) -> Path:
    return state_dir(stack) / "known_hosts"
