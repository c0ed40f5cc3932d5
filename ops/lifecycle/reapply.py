"""`invoke up --restart-only / --no-restart`: the request the node watchers act on.

The program puts it in the head's and each worker group's metadata `ray-bootstrap-version` (see
bootstrap/node_reapply.sh); the stamp makes each `up` a new request, so `--restart-only` twice
restarts Ray twice.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from bootstrap.node_metadata import REAPPLY_ENV
from ops.errors import OpsError


def reapply_request(restart_only: bool, no_restart: bool, now: datetime | None = None) -> str:
    """`restart-only <stamp>`, `no-restart <stamp>`, or "" (rerun what changed, restart Ray)."""
    if restart_only and no_restart:
        raise OpsError("--restart-only and --no-restart are alternatives: pick one")
    if not (restart_only or no_restart):
        return ""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{'restart-only' if restart_only else 'no-restart'} {stamp}"


def export_request(request: str) -> None:
    """The pulumi CLI the Automation API starts inherits our environment, and the program
    reads the request from it."""
    if request:
        os.environ[REAPPLY_ENV] = request
    else:
        os.environ.pop(REAPPLY_ENV, None)
