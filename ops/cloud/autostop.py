"""`invoke autostop`: change a running cluster's autostop without recreating anything.

The head's daemon (bootstrap/autostop.py) re-reads `~/.ray-autostop.json` at every check and
lets it win over the YAML's `provider.autostop`; this writes that file over SSH.
"""

from __future__ import annotations

import json
import shlex

from bootstrap.autostop import OVERRIDE_FILE
from ops.errors import OpsError
from ops.remote.commands import run_captured
from ops.remote.ssh import Connector, connect_stack

# The head's startup script keeps the daemon here (its state dir on GCE); the brackets keep
# pgrep from finding the shell that runs it, whose command line holds the pattern.
DAEMON_PATTERN = "ray-bootstra[p]/autostop.py"


def override_text(minutes: int | None, down: bool) -> str:
    """The override file's content; `minutes` None turns autostop off."""
    return json.dumps({"idle_minutes": minutes or 0, "down": down}, sort_keys=True) + "\n"


def parse_request(minutes: str | None, down: bool, cancel: bool) -> int | None:
    """--minutes N [--down] or --cancel, as the idle minutes to set (None: off)."""
    if cancel:
        if minutes is not None or down:
            raise OpsError("autostop: --cancel takes no --minutes or --down")
        return None
    if minutes is None:
        raise OpsError("autostop: give --minutes N (idle minutes before the cluster stops) "
                       "or --cancel")
    if not str(minutes).isdigit() or int(minutes) < 1:
        raise OpsError(f"autostop: --minutes must be a whole number of minutes, at least 1; "
                       f"got {minutes!r}")
    return int(minutes)


def set_autostop(connector: Connector, minutes: int | None, down: bool) -> str:
    """Write the head's override; what was set, and a warning when no daemon runs there."""
    client = connector.head()
    path = f"~/{OVERRIDE_FILE}"
    text = shlex.quote(override_text(minutes, down))
    code, _, err = run_captured(
        client, f"umask 077 && printf '%s' {text} > {path}.tmp && mv {path}.tmp {path}")
    if code != 0:
        raise OpsError(f"autostop: could not write {path} on the head: {err.strip()}")
    if minutes is None:
        said = "autostop is off: the cluster runs until you stop it"
    else:
        action = "deletes" if down else "stops"
        said = (f"autostop: the head {action} the cluster after {minutes} idle minutes "
                "(no task, actor, job, placement group or SSH session)")
    running, _, _ = run_captured(client, f"pgrep -f {shlex.quote(DAEMON_PATTERN)} > /dev/null")
    if running != 0:
        said += ("\nwarning: no autostop daemon runs on the head (it starts at boot from a "
                 "startup script that has one): the setting waits for the next boot")
    return said


def change_autostop(stack: str | None, minutes: str | None, down: bool, cancel: bool,
                    trust_first_use: bool = False) -> str:
    """`invoke autostop`: check the flags, then set the head's override; what was set."""
    idle_minutes = parse_request(minutes, down, cancel)
    with connect_stack(stack, trust_first_use) as connector:
        return set_autostop(connector, idle_minutes, down)
