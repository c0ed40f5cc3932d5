"""The Pulumi lifecycle: `invoke up/preview/refresh/down`, `scale`, `preflight`.

Owns driving the Pulumi Automation API with live progress (`pulumi_cli`), what `up` does
first (the TPU quota check in `up_quota`, replacing reclaimed TPU slices in `preempted`, the
re-apply request in `reapply`), deleting only the workers (`down_workers`), pinning a worker
count in the stack file (`scale`) and the quota table (`preflight`). May import `infra`,
`bootstrap`, the shared top of `ops`, `ops.review` (how a step changes a node) and
`ops.cloud.cloud_api` (the API clients); nothing imports it but `tasks.py`. Verbs:
`run_operation`, `down_workers`, `scale`, `preflight`, `render`.
"""
