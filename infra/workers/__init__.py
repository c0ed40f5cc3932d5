"""Ray workers as one Pulumi resource per node type, talking to the Compute/TPU APIs itself.

`WorkerGroup` is a dynamic resource; `WorkerGroupProvider` does the work (see provider.py).
"""

from infra.workers.nodes import WorkerGroupError
from infra.workers.provider import Deadlines, WorkerGroupProvider
from infra.workers.resource import WorkerGroup, WorkerGroupArgs
from infra.workers.retry import RetryPolicy

__all__ = [
    "Deadlines",
    "RetryPolicy",
    "WorkerGroup",
    "WorkerGroupArgs",
    "WorkerGroupError",
    "WorkerGroupProvider",
]
