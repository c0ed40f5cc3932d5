"""What the invoke tasks in tasks.py do, in one room per job; the shared pieces sit at the top.

Rooms: `review` (offline plans, diffs and prices), `lifecycle` (the Pulumi operations),
`remote` (work on the nodes over SSH), `cloud` (the running cluster through the cloud APIs:
status, cost, drills), `adopt` (a cluster `ray up` made, taken into a new stack), `stacks`
(which stack, its file, cluster and outputs, read once and handed down; its outputs kept in
memory by a background process while its state is unchanged; what the background processes
share), which the other rooms import. Shared by all at the top: `engine` (which pulumi CLI the
tasks drive, and `invoke engine`'s build of it), `errors` (one-line user errors), `confirm`
(asking before nodes are deleted), `paths` (local state and output paths), `pulumi_types` (type
tokens), `task_flags` and `task_groups` (the tasks' flags and `--list`). Arrows point one way:
tasks.py -> rooms -> ops.stacks -> shared top -> infra -> bootstrap -> model (and ops.review ->
policy), and no room imports tasks (tests/project/test_import_graph.py). Heavy imports (pulumi,
pydantic) stay inside the functions that need them where `invoke exec` would pay for them: it
must start fast.
"""
