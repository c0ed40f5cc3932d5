"""`invoke dashboard`: forward a local port to the head's dashboard until Ctrl-C.

As `ray dashboard` does, a busy local port is not fatal: the next ones are tried. With Ray's
token auth (ops.remote.ray_auth) it says how to open the page and submit jobs with the token,
which it prints only when asked.
"""

from __future__ import annotations

import threading

from ops.errors import OpsError
from ops.remote.attach import PortForward
from ops.remote.ray_auth import dashboard_lines, write_local_token
from ops.remote.ssh import Connector, connect_stack

DASHBOARD_PORT = 8265  # ray_constants.DEFAULT_DASHBOARD_PORT
PORT_TRIES = 10


def forward_dashboard(connector: Connector, port: int, remote_port: int) -> PortForward:
    """A started forward from 127.0.0.1:`port` (or the next free one; 0: any) to the head."""
    transport = connector.head().get_transport()
    for candidate in ([0] if port == 0 else range(port, port + PORT_TRIES)):
        try:
            return PortForward(transport, candidate, remote_port).start()
        except OpsError:
            continue
    raise OpsError(f"local ports {port}..{port + PORT_TRIES - 1} are all busy: pass --port "
                   "with a free one (0 picks any)")


def serve_dashboard(stack: str | None, port: int, remote_port: int,
                    trust_first_use: bool = False, show_token: bool = False) -> None:
    """Forward the dashboard and print its URL and how to use the stack's token, until
    Ctrl-C; the token itself only with `show_token`."""
    with connect_stack(stack, trust_first_use) as connector:
        forward = forward_dashboard(connector, port, remote_port)
        url = f"http://127.0.0.1:{forward.local_port}"
        token_file = write_local_token(connector.outputs)
        shown = connector.outputs.ray_auth_token if show_token else ""
        try:  # Ctrl-C once the URL shows stops it cleanly
            print(f"dashboard: {url} (Ctrl-C stops)", flush=True)
            for line in dashboard_lines(url, token_file, shown):
                print(line, flush=True)
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopped")
        finally:
            forward.close()
