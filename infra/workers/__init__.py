"""Compute workers as one Pulumi resource per node type, talking to the Compute API itself.

`WorkerGroup` is a dynamic resource; `WorkerGroupProvider` does the work (see provider.py).
`ClusterSweeper` makes `pulumi destroy` delete every node of the cluster, TPU VMs included
(see sweeper.py). TPU slices Pulumi keeps are `tpu.V2Vm` resources (infra/tpu_slices.py), or
`QueuedTpuSlice` requests to the TPU queued-resources API (see queued_slice.py). New nodes of
a type with a capacity ladder walk it (ladder.py; reservations read by reservations.py).
Importing this package does not import the google-cloud client libraries: the providers
import them when they first build a client.
"""

from infra.workers.apis import Deadlines
from infra.workers.nodes import WorkerGroupError
from infra.workers.provider import WorkerGroupProvider
from infra.workers.resource import ClusterSweeper, ClusterSweeperArgs, WorkerGroup, WorkerGroupArgs
from infra.workers.retry import RetryPolicy
from infra.workers.sweeper import ClusterSweeperProvider, ClusterSweepError

__all__ = [
    "ClusterSweepError",
    "ClusterSweeper",
    "ClusterSweeperArgs",
    "ClusterSweeperProvider",
    "Deadlines",
    "RetryPolicy",
    "WorkerGroup",
    "WorkerGroupArgs",
    "WorkerGroupError",
    "WorkerGroupProvider",
]
