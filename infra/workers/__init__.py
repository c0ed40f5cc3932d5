"""Compute workers as one Pulumi resource per node type, talking to the Compute API itself.

`WorkerGroup` is a dynamic resource; `WorkerGroupProvider` does the work (see provider.py).
`ClusterSweeper` makes `pulumi destroy` delete every node of the cluster, TPU VMs included
(see sweeper.py). TPU slices Pulumi keeps are `tpu.V2Vm` resources (infra/tpu_slices.py), or
`QueuedTpuSlice` requests to the TPU queued-resources API (see queued_slice.py). New nodes of
a type with a capacity ladder walk it (ladder.py; reservations read by reservations.py).
Compute is called over REST (compute_rest.py: google-auth's AuthorizedSession, imported at
the first call); the TPU client library is imported when a TPU client is first built.
Importing this package imports neither.
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
