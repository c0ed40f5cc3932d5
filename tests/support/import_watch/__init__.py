"""Which modules the processes a test starts import: `watch_env` is the environment that makes
every Python process started under it note the watched imports (this folder's
`sitecustomize.py`), `watched_imports` what they noted."""

from __future__ import annotations

import os
from pathlib import Path

FOLDER = Path(__file__).parent
COMPUTE_V1 = "google.cloud.compute_v1"


def watch_env(log: Path, *modules: str) -> dict[str, str]:
    """PYTHONPATH with this folder first, and what to watch (default: google-cloud-compute's
    package, whose import loads every Compute service client), noted in `log`."""
    path = os.pathsep.join(filter(None, [str(FOLDER), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "RAY_GCP_IMPORT_WATCH": ",".join(modules or (COMPUTE_V1,)),
            "RAY_GCP_IMPORT_WATCH_LOG": str(log)}


def watched_imports(log: Path) -> list[str]:
    """One line per process that imported a watched module: pid, module, command line."""
    return log.read_text().splitlines() if log.exists() else []
