"""What `invoke up` ends with: the head's address, whether Ray is up on it, what to type next.

Whether Ray is up is what the head's bootstrap says of itself in its guest attribute
`ray-bootstrap/status` (`ready`, `running:<stage>`, `failed:<stage>:<exit code>`;
bootstrap/node_bootstrap.sh), read from the Compute API as the stack's identity, no SSH: asked
every few seconds for a bounded time (RAY_GCP_UP_WAIT_S, default 90 s; 0 asks once), as a new
head takes minutes to install and start Ray. The attribute `ray-bootstrap/version` tells a
head still on the previous startup script (re-applying a changed one) from one that is done.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

from ops.stacks.stack import StackOutputs

WAIT_ENV = "RAY_GCP_UP_WAIT_S"
DEFAULT_WAIT_S = 90.0
POLL_S = 5.0
NAMESPACE = "ray-bootstrap/"


def up_wait_s() -> float:
    """How long `up` waits for Ray on the head: RAY_GCP_UP_WAIT_S seconds, else the default."""
    given = os.environ.get(WAIT_ENV, "")
    try:
        return max(0.0, float(given)) if given else DEFAULT_WAIT_S
    except ValueError:
        from ops.errors import OpsError

        raise OpsError(f"{WAIT_ENV}={given!r} is not a number of seconds: set it to e.g. 90, "
                       "or 0 not to wait") from None


def published(outputs: StackOutputs) -> dict[str, str]:
    """The head's `ray-bootstrap/` guest attributes (key -> value); empty when it has
    published none yet (GCE answers 404)."""
    from google.api_core.exceptions import NotFound

    from ops.cloud.cloud_api import api_clients

    try:
        items = api_clients(outputs).compute.guest_attributes(
            outputs.project, outputs.zone, outputs.head_name, NAMESPACE)
    except NotFound:
        return {}
    return {item["key"]: item.get("value", "").strip() for item in items}


def ray_state(outputs: StackOutputs, wait_s: float, ask: Callable[[], dict[str, str]] | None
              = None, sleep: Callable[[float], None] = time.sleep) -> str:
    """One line on Ray on the head, asked until its bootstrap is done (ready or failed on the
    current script) or `wait_s` seconds passed."""
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError
    from requests import RequestException

    ask = ask or (lambda: published(outputs))
    wanted = outputs.wanted_version(outputs.head)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            attributes = ask()
        except (GoogleAPIError, GoogleAuthError, RequestException) as exc:
            reason = getattr(exc, "message", None) or str(exc).splitlines()[0]
            return f"could not ask whether Ray is up ({reason})"
        status = attributes.get("status", "")
        current = not wanted or attributes.get("version", "") == wanted
        if current and (status == "ready" or status.startswith("failed:")):
            break
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sleep(min(POLL_S, left))
    return _said(status, current, wait_s)


def _said(status: str, current: bool, wait_s: float) -> str:
    if status == "ready" and current:
        return "Ray is up"
    if status.startswith("failed:"):
        _, stage, code = [*status.split(":", 2), ""][:3]
        return (f"Ray is NOT up: the bootstrap failed at {stage} (exit {code or '?'}); "
                "`invoke status` shows its log")
    waited = f"after {wait_s:.0f} s" if wait_s else "yet"
    if not status:
        return f"Ray is not up {waited} (the head has not reported yet)"
    if not current:
        return f"Ray is not up on the new startup script {waited} (re-applying it)"
    if status.startswith("running:"):
        return f"Ray is not up {waited} (bootstrap at {status.split(':', 1)[1]})"
    return f"Ray is not up {waited} (the head says {status!r})"


def summary(outputs: StackOutputs, state: str) -> list[str]:
    stack = outputs.stack
    return [f"head {outputs.head_name} at {outputs.head_address}: {state}",
            f"next: `invoke attach -s {stack}` (a shell on the head), "
            f"`invoke dashboard -s {stack}` (Ray's dashboard here), "
            f"`invoke status -s {stack}` (nodes and Ray), "
            f"`invoke down -s {stack}` (delete the cluster)"]


def print_summary(outputs: StackOutputs, out: TextIO = sys.stdout,
                  wait_s: float | None = None) -> None:
    """`invoke up`'s last lines."""
    wait = up_wait_s() if wait_s is None else wait_s
    if wait:
        print(f"waiting up to {wait:.0f} s for Ray on the head (Ctrl-C stops waiting; the "
              "cluster stays)", file=out, flush=True)
    try:
        state = ray_state(outputs, wait)
    except KeyboardInterrupt:
        state = "not asked (interrupted)"
    print("\n".join(summary(outputs, state)), file=out, flush=True)
