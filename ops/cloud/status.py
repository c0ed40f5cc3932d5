"""`invoke status`: the stack's nodes and the workers Ray's autoscaler launched as a table,
their preemptions and bootstrap stages, then `ray status` from the head."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence

from ops.cloud.autoscaled import autoscaled_rows
from ops.cloud.bootstrap_status import BOOTSTRAP_LOG, bootstrap_table, read_nodes
from ops.cloud.capacity_status import capacity_lines
from ops.cloud.cloud_api import StackApi
from ops.cloud.orphans import stack_orphans
from ops.cloud.preemptions import preemption_lines
from ops.cloud.spend_status import head_spend_lines, label_time
from ops.errors import OpsError
from ops.remote.commands import node_shell, run_captured
from ops.remote.ray_auth import with_ray_auth
from ops.remote.ssh import Connector, connect_stack
from ops.stacks.stack import OUTPUTS_ENV, Node, StackOutputs

LOG_TAIL_LINES = 20
RAY_STATUS_COMMAND = "ray status"


def nodes_table(outputs: StackOutputs, autoscaled: Sequence[Node] = ()) -> str:
    """One row per node, the stack's then the `autoscaled` workers Ray launched; MARKET says
    which workers are spot and which on-demand (a spot type's capacity fallback)."""
    header = ("NAME", "TYPE", "KIND", "MARKET", "STATE", "INTERNAL IP", "EXTERNAL IP")
    rows = [header] + [
        (n.name, n.node_type, n.kind, n.market or "-", n.status, n.internal_ip or "-",
         n.external_ip or "-")
        for n in (*outputs.nodes, *autoscaled)
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def status_command(outputs: StackOutputs, command: str | None = None) -> str:
    """What `invoke status` runs on the head: `ray status`, with the stack's token auth."""
    return with_ray_auth(command or RAY_STATUS_COMMAND, outputs)


def ray_status(
    connector: Connector, bootstrap_log: str = BOOTSTRAP_LOG, command: str | None = None
) -> str:
    """`ray status` on the head (with Ray's token auth when the stack has it); if Ray is not
    up yet, say so with the bootstrap log's tail."""
    client = connector.head()
    status = status_command(connector.outputs, command)
    code, out, _ = run_captured(client, node_shell(status))
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


def head_stopped_note(api: StackApi) -> str | None:
    """When the head cannot be reached: what the Compute API says of it, and whether autostop
    (its `ray-autostop` labels) or the spend cap (`ray-spend-cap`) stopped it, and when. None
    when the API cannot tell or the head runs (then the SSH error stands)."""
    from google.api_core.exceptions import GoogleAPIError, NotFound
    from google.auth.exceptions import GoogleAuthError
    from requests import RequestException

    from bootstrap.autostop import REASON_LABEL, TIME_LABEL
    from bootstrap.head_provider.spend import CAPPED_AT_LABEL, CAPPED_LABEL

    outputs = api.outputs
    try:
        head = api.head()
    except NotFound:
        return (f"the head {outputs.head_name} does not exist (deleted by `invoke down`, or by "
                f"autostop with down: true): `invoke up --stack {outputs.stack}` recreates it")
    except (GoogleAPIError, GoogleAuthError, RequestException):
        return None
    status, labels = head.get("status", ""), head.get("labels") or {}
    if status == "RUNNING":
        return None
    for reason_label, time_label, why, who in (
            (CAPPED_LABEL, CAPPED_AT_LABEL, "at its total spend cap", "provider.spend_cap"),
            (REASON_LABEL, TIME_LABEL, "for idleness", "autostop")):
        reason, at = labels.get(reason_label), labels.get(time_label)
        if reason and at:
            return (f"the cluster was {reason} {why} at {label_time(at)} ({who}): `invoke up "
                    f"--stack {outputs.stack}` brings it back")
    return f"the head is {status}: `invoke up --stack {outputs.stack}` starts it again"


def show_status(stack: str | None, trust_first_use: bool = False) -> None:
    """Print, as each part arrives: the nodes table, preemptions, the cluster's orphans
    (ops/cloud/orphans.py), each node's bootstrap stage and `ray status`; an unreachable head
    is explained by the Compute API when it can be."""
    with connect_stack(stack, trust_first_use, warm=True) as connector:
        api = StackApi(connector.outputs)
        autoscaled, unlisted = autoscaled_rows(api)
        print(nodes_table(connector.outputs, autoscaled), flush=True)
        for line in unlisted:
            print(line, flush=True)
        for line in preemption_lines(api):
            print(line, flush=True)
        for line in capacity_lines(api):
            print(line, flush=True)
        for line in head_spend_lines(api):
            print(line, flush=True)
        if not os.environ.get(OUTPUTS_ENV):  # outputs from a file: no state to compare
            stack_orphans(connector.outputs.stack, sys.stdout)
        print()
        try:
            connector.head()
        except OpsError:  # unreachable head: stopped (by autostop?) or gone, says the API
            note = head_stopped_note(api)
            if note is None:
                raise
            print(note)
            return
        print(bootstrap_table(read_nodes(connector)), flush=True)
        print()
        print(ray_status(connector))
