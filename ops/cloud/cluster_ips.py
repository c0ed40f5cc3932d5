"""`invoke get-head-ip` / `get-worker-ips`: addresses for scripts, one a line, from the outputs.

Like `ray get-head-ip`, the external address by default; a node without one (internal-only
networks) gives its internal address, as `use_internal_ips` does in Ray.
"""

from __future__ import annotations

from ops.stacks.stack import StackOutputs


def head_ip(outputs: StackOutputs, internal: bool = False) -> str:
    return outputs.head_internal_ip if internal else outputs.head_address


def worker_ips(outputs: StackOutputs, internal: bool = False) -> list[str]:
    return [node.internal_ip if internal else (node.external_ip or node.internal_ip)
            for node in outputs.workers]
