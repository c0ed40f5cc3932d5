"""`invoke status`: what each node's bootstrap says, over SSH, in parallel.

A node mirrors its guest attributes `ray-bootstrap/{version,status}` under its state dir
(bootstrap/node_bootstrap.sh `report_attribute`): the version of the startup script it last
applied, and `running:<stage>`, `ready` or `failed:<stage>:<exit code>`. A node whose version
differs from the stack's `script_versions` has not converged yet (its node watcher re-applies
the new script); a failed one shows the last lines of its bootstrap log.
"""

from __future__ import annotations

import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ops.errors import OpsError
from ops.remote.commands import run_captured
from ops.remote.ssh import Connector
from ops.stacks.stack import Node

# bootstrap.node_metadata.STATE_DIR's mirror of the guest attributes, and its LOG_FILE (a test
# keeps them equal; importing bootstrap here would cost `invoke status` the config model's import).
ATTRIBUTES_DIR = "/run/ray-bootstrap/guest-attributes/ray-bootstrap"
BOOTSTRAP_LOG = "/var/log/ray-bootstrap.log"
LOG_TAIL_LINES = 15


@dataclass(frozen=True)
class NodeBootstrap:
    name: str
    applied: str  # script version, "" when the node has not reported one
    wanted: str
    status: str  # running:<stage> | ready | failed:<stage>:<rc> | unreachable: ...
    log_tail: str = ""

    @property
    def state(self) -> str:
        if self.status.startswith(("failed:", "unreachable")):
            return self.status
        if self.wanted and self.applied != self.wanted:
            return f"converging ({self.status or 'no status yet'})"
        return self.status or "no status yet"


def read_node(connector: Connector, node: Node, attributes_dir: str | None = None,
              log_file: str | None = None) -> NodeBootstrap:
    wanted = connector.outputs.wanted_version(node)
    directory = shlex.quote(attributes_dir or ATTRIBUTES_DIR)
    # The log is root's alone (0600): read with sudo, as the head's tail in status.py.
    tail_log = f"tail -n {LOG_TAIL_LINES} {shlex.quote(log_file or BOOTSTRAP_LOG)}"
    command = (f"cat {directory}/version 2>/dev/null; echo; cat {directory}/status 2>/dev/null;"
               f" echo; case $(cat {directory}/status 2>/dev/null) in failed:*) "
               f"{{ sudo -n {tail_log} 2>/dev/null || {tail_log} 2>&1; }};; esac")
    try:
        _, out, _ = run_captured(connector.node(node), command)
    except OpsError as exc:
        return NodeBootstrap(node.name, "", wanted, f"unreachable: {exc}")
    applied, status, tail = ([*out.split("\n", 2), "", ""])[:3]
    return NodeBootstrap(node.name, applied.strip(), wanted, status.strip(), tail.rstrip())


def read_nodes(connector: Connector, **paths: str | None) -> list[NodeBootstrap]:
    nodes = list(connector.outputs.nodes)
    if not nodes:
        return []
    try:
        connector.head()  # the jump host, connected once before the threads need it
    except OpsError as exc:
        return [NodeBootstrap(n.name, "", connector.outputs.wanted_version(n),
                              f"unreachable: {exc}") for n in nodes]
    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
        return list(pool.map(lambda node: read_node(connector, node, **paths), nodes))


def bootstrap_table(reports: list[NodeBootstrap]) -> str:
    """NAME / APPLIED / WANTED / BOOTSTRAP, then each failed node's log tail."""
    header = ("NAME", "APPLIED", "WANTED", "BOOTSTRAP")
    rows = [header] + [(r.name, r.applied or "-", r.wanted or "-", r.state) for r in reports]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)), row[-1]])
             for row in rows]
    for report in reports:
        if report.log_tail:
            lines += ["", f"{report.name}: {report.status}; last lines of its bootstrap log:",
                      report.log_tail]
    return "\n".join(lines)
