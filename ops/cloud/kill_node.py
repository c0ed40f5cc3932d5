"""`invoke kill-random-node`: stop Ray on one random worker, for failure drills.

As `ray kill-random-node` does: by default a soft kill (`ray stop` on the node, which stays
up); `--hard` deletes the instance (or TPU VM) through the API as the stack's identity
(cloud_api.py), as Ray's node provider terminates it. Asks first unless --yes. With no
workers it says so and succeeds, as Ray does. A worker of a WorkerGroup is brought back by
the next `up`.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Sequence

from ops.errors import OpsError
from ops.remote.commands import in_container, node_shell, stream_command
from ops.remote.ssh import Connector, connect_stack
from ops.stacks.stack import Node, StackOutputs, stack_credentials

KILL_COMMAND = "ray stop"
PROMPT = "A random node will be killed. Confirm [y/N]: "


def confirmed(ask: Callable[[str], str] = input) -> bool:
    """The user's yes; with no terminal to ask on (and `ask` the terminal's) one line saying
    to add --yes."""
    if ask is input and not sys.stdin.isatty():
        raise OpsError("nothing killed: no terminal to ask on; add -y (--yes) to go ahead "
                       "without the question")
    try:
        return ask(PROMPT).strip().lower() in ("y", "yes")
    except EOFError:  # no terminal to answer on: not confirmed
        return False


def kill_random_node(
    connector: Connector,
    yes: bool,
    hard: bool = False,
    ask: Callable[[str], str] = input,
    choose: Callable[[Sequence[Node]], Node] = random.choice,
) -> Node | None:
    """The node whose Ray was stopped (or that was deleted); None when there are no workers."""
    workers = connector.outputs.workers
    if not workers:
        print("No worker nodes detected.")
        return None
    outputs = connector.outputs
    print(f"stack {outputs.stack!r}: cluster {outputs.cluster_name!r} in project "
          f"{outputs.project or '?'}, zone {outputs.zone or '?'}: one of its {len(workers)} "
          f"worker(s) will be {'deleted' if hard else 'stopped (ray stop)'}", flush=True)
    if not yes and not confirmed(ask):
        raise OpsError("aborted: nothing was killed (pass --yes to skip the question)")
    node = choose(workers)
    if hard:
        print(f"Terminating {node.name}", flush=True)
        terminate(connector.outputs, node)
        return node
    command = KILL_COMMAND
    if connector.outputs.docker_container_name:
        command = in_container(command, connector.outputs.docker_container_name)
    print(f"Shutdown {node.name}", flush=True)
    status = stream_command(connector.node(node), node_shell(command), sys.stdout.buffer,
                            sys.stderr.buffer)
    if status != 0:
        raise OpsError(f"`{KILL_COMMAND}` on {node.name} exited {status}", exit_code=status)
    return node


def terminate(outputs: StackOutputs, node: Node) -> None:
    """Delete the instance (or the TPU VM), in its own zone, as the stack's identity, and wait
    for it to go."""
    from ops.cloud.cloud_api import nodes_api
    from ops.stacks.cloud_nodes import api_errors

    with api_errors(f"deleting {node.name}"):
        api = nodes_api(outputs.project, node.zone or outputs.zone, node.api,
                        stack_credentials(outputs))
        api.delete([node.name])


def kill_stack_node(stack: str | None, yes: bool, hard: bool,
                    trust_first_use: bool = False) -> None:
    """`invoke kill-random-node`: kill one random worker of the stack and name it."""
    with connect_stack(stack, trust_first_use) as connector:
        node = kill_random_node(connector, yes, hard)
    if node is not None:
        print(f"Killed node with IP {node.internal_ip}")
