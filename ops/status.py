"""`invoke status`: the stack's nodes as a table, then `ray status` from the head."""

from __future__ import annotations

import shlex

from ops.errors import OpsError
from ops.remote import node_shell, run_captured
from ops.ssh import Connector
from ops.stack_outputs import StackOutputs

BOOTSTRAP_LOG = "/var/log/ray-bootstrap.log"
LOG_TAIL_LINES = 20
RAY_STATUS_COMMAND = "ray status"


def nodes_table(outputs: StackOutputs) -> str:
    header = ("NAME", "TYPE", "KIND", "STATE", "INTERNAL IP", "EXTERNAL IP")
    rows = [header] + [
        (n.name, n.node_type, n.kind, n.status, n.internal_ip or "-", n.external_ip or "-")
        for n in outputs.nodes
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def ray_status(
    connector: Connector, bootstrap_log: str = BOOTSTRAP_LOG, command: str | None = None
) -> str:
    """`ray status` on the head; if Ray is not up yet, say so with the bootstrap log's tail."""
    client = connector.head()
    code, out, _ = run_captured(client, node_shell(command or RAY_STATUS_COMMAND))
    if code == 0:
        return out.rstrip()
    # The log is root's alone (it holds command lines): the ssh user reads it with sudo.
    tail_log = f"tail -n {LOG_TAIL_LINES} {shlex.quote(bootstrap_log)}"
    _, tail, _ = run_captured(client, f"{{ sudo -n {tail_log} || {tail_log}; }} 2>/dev/null")
    detail = tail.rstrip() or "(the log is empty or missing: the instance may still be booting)"
    raise OpsError(
        f"head not ready yet: `ray status` exited {code} on {connector.outputs.head_address}; "
        f"last lines of {bootstrap_log}:\n{detail}"
    )
