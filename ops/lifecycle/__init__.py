"""The Pulumi lifecycle: `invoke up/preview/refresh/down`, `scale` and `preflight`.

Owns driving the Pulumi Automation API with live progress (`pulumi_cli`, `events`), what `up`
does first (the TPU quota check in `up_quota`, replacing reclaimed TPU slices in `preempted`,
the re-apply request in `reapply`), deleting only the workers (`down_workers`), pinning a
worker count in the stack file (`scale`) and the quota table (`preflight`).
May import `infra`, `bootstrap`, the shared top of `ops`, `ops.review` (what a step does to a
node) and `ops.cloud.cloud_api` (the node API); only `tasks.py` imports it. Verbs: `up`,
`operate`, `run_operation`, `down`, `scale`, `preflight_stack`.
"""
