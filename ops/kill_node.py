"""`invoke kill-random-node`: stop Ray on one random worker, for failure drills.

As `ray kill-random-node` does by default (a soft kill): `ray stop` on the node, which stays
up; asks first unless --yes. With no workers it says so and succeeds, as Ray does.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Sequence

from ops.errors import OpsError
from ops.remote import in_container, node_shell, stream_command
from ops.ssh import Connector
from ops.stack_outputs import Node

KILL_COMMAND = "ray stop"
PROMPT = "A random node will be killed. Confirm [y/N]: "


def confirmed(ask: Callable[[str], str] = input) -> bool:
    try:
        return ask(PROMPT).strip().lower() in ("y", "yes")
    except EOFError:  # no terminal to answer on: not confirmed
        return False


def kill_random_node(
    connector: Connector,
    yes: bool,
    ask: Callable[[str], str] = input,
    choose: Callable[[Sequence[Node]], Node] = random.choice,
) -> Node | None:
    """The node whose Ray was stopped; None when the stack has no workers."""
    workers = connector.outputs.workers
    if not workers:
        print("No worker nodes detected.")
        return None
    if not yes and not confirmed(ask):
        raise OpsError("aborted: nothing was killed (pass --yes to skip the question)")
    node = choose(workers)
    command = KILL_COMMAND
    if connector.outputs.docker_container_name:
        command = in_container(command, connector.outputs.docker_container_name)
    print(f"Shutdown {node.name}", flush=True)
    status = stream_command(connector.node(node), node_shell(command), sys.stdout.buffer,
                            sys.stderr.buffer)
    if status != 0:
        raise OpsError(f"`{KILL_COMMAND}` on {node.name} exited {status}", exit_code=status)
    return node
