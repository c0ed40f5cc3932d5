"""tmux/screen for `exec --tmux/--screen`, `submit --tmux/--screen` and `attach --new`, and
port forwards held while a command runs (`--port-forward` of exec and submit).

A detached command runs in a new window of the session `ray` (created when missing), the one
`invoke attach --tmux/--screen` attaches to, so its output can be looked at later, as Ray's
"Run `ray attach --tmux` to check command status" promises. Like Ray, the window keeps a shell
(`; exec bash`) once the command ends.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator

import paramiko

from ops.attach import PortForward, parse_forward
from ops.errors import OpsError

SESSION = "ray"


def detached_command(command: str, tmux: bool, screen: bool) -> str:
    """Shell that starts `command` in the `ray` session and returns at once."""
    if tmux and screen:
        raise OpsError("--tmux and --screen are alternatives: pick one")
    # A subshell: `command` may `exec` (node_shell does), and the window must keep its shell.
    body = shlex.quote(f"( {command} ); exec bash")
    if tmux:
        return (f"tmux new-window -t {SESSION}: bash -c {body} 2>/dev/null"
                f" || tmux new-session -d -s {SESSION} bash -c {body}")
    return (f"screen -S {SESSION} -X screen bash -c {body} >/dev/null 2>&1"
            f" || screen -L -dmS {SESSION} bash -c {body}")


def attach_hint(tmux: bool) -> str:
    return f"Run `invoke attach --{'tmux' if tmux else 'screen'}` to check command status."


def new_session_command(tmux: bool, screen: bool) -> str:
    """`attach --new`: a new session rather than the shared `ray` one (Ray's `--new`)."""
    if tmux and screen:
        raise OpsError("--tmux and --screen are alternatives: pick one")
    if tmux:
        return "tmux new-session"
    if screen:
        return "screen -L"
    raise OpsError("--new only makes sense with --tmux or --screen")


@contextlib.contextmanager
def forwarding(client: paramiko.SSHClient, specs: list[str] | None) -> Iterator[None]:
    """Local forwards (PORT or LOCAL:REMOTE) to the node while the block runs."""
    forwards: list[PortForward] = []
    try:
        for spec in specs or []:
            forward = PortForward(client.get_transport(), *parse_forward(spec)).start()
            forwards.append(forward)
            print(f"forwarding 127.0.0.1:{forward.local_port} -> port {forward.remote_port}",
                  flush=True)
        yield
    finally:
        for forward in forwards:
            forward.close()
