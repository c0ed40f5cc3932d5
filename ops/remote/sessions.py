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
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ops.errors import OpsError

if TYPE_CHECKING:  # paramiko only when a forward is asked for: a plain exec skips its import
    import paramiko

    from ops.remote.attach import PortForward

SESSION = "ray"


def _one_multiplexer(tmux: bool, screen: bool) -> None:
    if tmux and screen:
        raise OpsError("--tmux and --screen are alternatives: pick one")


def detached_command(command: str, tmux: bool, screen: bool) -> str:
    """Shell that starts `command` in the `ray` session and returns at once."""
    _one_multiplexer(tmux, screen)
    # A subshell: `command` may `exec` (node_shell does), and the window must keep its shell.
    body = shlex.quote(f"( {command} ); exec bash")
    if tmux:
        return (f"tmux new-window -t {SESSION}: bash -c {body} 2>/dev/null"
                f" || tmux new-session -d -s {SESSION} bash -c {body}")
    return (f"screen -S {SESSION} -X screen bash -c {body} >/dev/null 2>&1"
            f" || screen -L -dmS {SESSION} bash -c {body}")


def detacher(tmux: bool, screen: bool) -> Callable[[str], str] | None:
    """What turns a node's shell command into a detached one; None without --tmux/--screen."""
    if not (tmux or screen):
        return None
    _one_multiplexer(tmux, screen)  # before anything runs
    return lambda shell: detached_command(shell, tmux, screen)


def one_node_only(wrap: Callable[[str], str] | None, port_forward: list[str] | None) -> None:
    if wrap or port_forward:
        raise OpsError("--tmux, --screen and --port-forward work on one node: drop --all")


def attach_hint(tmux: bool) -> str:
    return f"Run `invoke attach --{'tmux' if tmux else 'screen'}` to check command status."


def new_session_command(tmux: bool, screen: bool) -> str:
    """`attach --new`: a new session rather than the shared `ray` one (Ray's `--new`)."""
    _one_multiplexer(tmux, screen)
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
            from ops.remote.attach import PortForward, parse_forward

            forward = PortForward(client.get_transport(), *parse_forward(spec)).start()
            forwards.append(forward)
            print(f"forwarding 127.0.0.1:{forward.local_port} -> port {forward.remote_port}",
                  flush=True)
        yield
    finally:
        for forward in forwards:
            forward.close()
