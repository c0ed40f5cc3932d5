"""`invoke dashboard`: forward a local port to the head's dashboard until Ctrl-C.

As `ray dashboard` does, a busy local port is not fatal: the next ones are tried.
"""

from __future__ import annotations

import threading

from ops.errors import OpsError
from ops.remote.attach import PortForward
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
                    trust_first_use: bool = False) -> None:
    """Forward the dashboard and print its URL, until Ctrl-C."""
    with connect_stack(stack, trust_first_use) as connector:
        forward = forward_dashboard(connector, port, remote_port)
        print(f"dashboard: http://127.0.0.1:{forward.local_port} (Ctrl-C stops)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopped")
        finally:
            forward.close()
