"""Work on every node at once (`exec --all-nodes`, `rsync-up --all-nodes`, `file-mounts`): at
most `parallel` nodes in hand at a time, a node that fails said in one line (its name, its
address, the exit status or the SSH error) while the others go on, and a summary line at the
end.

Workers are reached through the head as a jump host (ops.remote.ssh, ops.remote.openssh): one
connection to the head carries every worker's. The default of 10 nodes at a time follows
sshd's own default `MaxStartups 10:30:100` (sshd_config(5): past 10 connections that have not
yet authenticated, sshd refuses 30% of new ones, and all of them past 100): a jump host reached
without a shared connection (`ssh -J`, or a ProxyCommand when no ControlMaster is kept) gets one
new connection per worker, and more than 10 in their handshake at once would see some dropped
at random. `--parallel` raises it for a head whose sshd allows more.

Every node is the stack's (the head and the workers Pulumi keeps, from its outputs) and the
workers Ray's autoscaler launched, listed from the Compute API in every zone
(ops.stacks.cloud_nodes, as `invoke status` lists them and `ray exec --all-nodes` reaches
them), each once; an autoscaler's worker that is not RUNNING (stopping, stopped, suspended) is
skipped and counted in the summary. When the API cannot be asked (a refusal, no credentials, no
answer), one line says what failed and the fan-out goes on with the stack's nodes, its summary
saying the autoscaler's workers were not listed: the nodes the stack knows still get the work
(a setup fix, a code sync), and you are told the rest were not reached.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ops.errors import OpsError
from ops.stacks.cloud_nodes import (
    API_ENDPOINT_ENV,
    LISTING,
    api_clients,
    api_errors,
    autoscaled_nodes,
)
from ops.stacks.stack import Node, StackOutputs, stack_credentials

if TYPE_CHECKING:
    from ops.remote.ssh import Connector

DEFAULT_PARALLEL = 10
SSH_ERROR = 255  # ssh's own status when the connection, not the command, failed
RUNNING = "RUNNING"


@dataclass(frozen=True)
class NodeOutcome:
    """How one node's part ended: its status (SSH_ERROR and `error` when it could not be
    reached or refused us), and `error` when the work failed on our side."""

    node: Node
    status: int
    error: str = ""

    @property
    def failed(self) -> bool:
        return self.status != 0 or bool(self.error)


def check_parallel(flag: str | int | None) -> int:
    """`--parallel` as typed (None: not given, the default) -> how many nodes at once."""
    if flag is None:
        return DEFAULT_PARALLEL
    try:
        parallel = int(flag)
    except ValueError:
        raise OpsError(f"--parallel {flag!r} is not a number: give how many nodes to work on "
                       "at once, e.g. --parallel 20") from None
    if parallel < 1:
        raise OpsError(f"--parallel {parallel}: give at least 1 (nodes worked on at once)")
    return parallel


def failure_line(label: str, outcome: NodeOutcome) -> str:
    """`exec: NODE (IP) failed: exit 3` or `...: the SSH error`, one line."""
    node = outcome.node
    why = outcome.error.splitlines()[0] if outcome.error else f"exit {outcome.status}"
    return f"{label}: {node.name} ({node.internal_ip or 'no address'}) failed: {why}"


def summary_line(label: str, outcomes: list[NodeOutcome], seconds: float, note: str = "") -> str:
    failed = sum(outcome.failed for outcome in outcomes)
    return (f"{label}: {len(outcomes) - failed} ok, {failed} failed, {len(outcomes)} nodes "
            f"in {seconds:.1f} s{'; ' + note if note else ''}")


@dataclass(frozen=True)
class EveryNode:
    """The nodes a fan-out works on; `note`, what the summary adds about the others."""

    nodes: list[Node]
    note: str = ""


def every_node(connector: Connector, label: str) -> EveryNode:
    """The stack's nodes and the autoscaler's RUNNING workers, each once; the connector's
    outputs then list them all (a worker's host keys are looked up in its own zone). A
    listing that failed is said in one line on stderr, and the stack's nodes are returned."""
    outputs = connector.outputs
    stack_nodes = list(outputs.nodes) or [outputs.head]
    if not (outputs.project and outputs.zone):
        return EveryNode(stack_nodes)
    try:
        listed = _autoscaled(outputs)
    except OpsError as exc:
        print(f"{label}: {exc}: working on the stack's {len(stack_nodes)} nodes only",
              file=sys.stderr, flush=True)
        return EveryNode(stack_nodes, "the autoscaler's workers not listed")
    known = {node.name for node in stack_nodes}
    new = [node for node in listed if node.name not in known]
    running = [node for node in new if node.status == RUNNING]
    nodes = [*stack_nodes, *running]
    connector.outputs = replace(outputs, nodes=tuple(nodes))
    skipped = len(new) - len(running)
    return EveryNode(nodes, f"{skipped} not running, skipped" if skipped else "")


def _autoscaled(outputs: StackOutputs) -> list[Node]:
    """The listing; without any credentials to ask with, refused at once (neither the Google
    libraries' import nor google.auth's probe of a metadata server, seconds, is paid)."""
    from ops.remote.host_keys import credentials_may_exist

    if not (os.environ.get(API_ENDPOINT_ENV) or stack_credentials(outputs)
            or credentials_may_exist()):
        raise OpsError(f"{LISTING}: no credentials to ask the Compute API with (set "
                       "provider.gcp_credentials or run `gcloud auth application-default "
                       "login`)")
    with api_errors(LISTING):
        return autoscaled_nodes(outputs, api_clients(outputs))


def fan_out(nodes: Iterable[Node], work: Callable[[Node], int], parallel: int, label: str,
            say: Callable[[str], None] | None = None, note: str = "") -> list[NodeOutcome]:
    """`work(node)` (a remote status) on every node, `parallel` at a time; each failure
    said (`say`: a line to stderr by default) as it happens, then the summary (with `note`
    after it). The outcomes come back in the nodes' order."""
    nodes = list(nodes)
    if not nodes:
        raise OpsError(f"{label}: the stack lists no nodes")
    say = say or _to_stderr()
    started = time.perf_counter()

    def one(node: Node) -> NodeOutcome:
        try:
            outcome = NodeOutcome(node, work(node))
        except OpsError as exc:
            outcome = NodeOutcome(node, SSH_ERROR, str(exc) or type(exc).__name__)
        except Exception as exc:  # noqa: BLE001 - one node's failure, whatever it is, is its line
            outcome = NodeOutcome(node, SSH_ERROR, f"{type(exc).__name__}: {exc}")
        if outcome.failed:
            say(failure_line(label, outcome))
        return outcome

    with ThreadPoolExecutor(max_workers=min(parallel, len(nodes))) as pool:
        outcomes = list(pool.map(one, nodes))
    say(summary_line(label, outcomes, time.perf_counter() - started, note))
    return outcomes


def fan_out_status(outcomes: list[NodeOutcome]) -> int:
    """The first failed node's status (in the nodes' order), 0 when every node succeeded."""
    return next((outcome.status or 1 for outcome in outcomes if outcome.failed), 0)


def _to_stderr() -> Callable[[str], None]:
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            print(line, file=sys.stderr, flush=True)

    return say
