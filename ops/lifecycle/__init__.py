"""The Pulumi lifecycle: `invoke up/preview/refresh/down`, `scale` and `preflight`.

Owns driving the Pulumi Automation API with live progress (`pulumi_cli`, `events`), a cluster
YAML given with `-c` as its stack (`cluster_yaml`: the stack file, backend and passphrase
placed, the stack created), what `up` does first (every check `invoke plan` makes, through
`ops.review.plan.check_before_create`; the TPU quota check in `up_quota`, replacing reclaimed
TPU slices in `preempted`, the re-apply request in `reapply`) and last (the head, whether Ray is
up on it and what to type next: `up_summary`), deleting only the workers (`down_workers`),
pinning a worker count in the stack file (`scale`), the quota table (`preflight`), the network's
firewall rules and Private Google Access (`network_check`) and how these checks reach the APIs
(`apis`); a stack's lock shown and cleared on request (`locks`, `invoke unlock`), what a run
killed half way left settled before the next acts (`pending`), orphans the program makes
under their names taken into the state (`adopt_orphans`), a run queued behind its stack's
lock (`lock_wait`, `--wait`), and the team's state bucket
(`state_bucket`, `invoke state-bucket`).
May import `model`, `infra`, `bootstrap`, the shared top of `ops`, `ops.stacks`,
`ops.review` (what a step does to a node), `ops.cloud.cloud_api` (the node API),
`ops.cloud.orphans` (what `up` and `preview` report first) and
`ops.remote.host_keys` (whether credentials exist) and `ops.remote.os_login` (your OS Login
profile cleaned on `up` and `down`); only `tasks.py` imports it. Verbs: `up`, `operate`,
`stack_from_yaml`, `run_operation`, `down`, `scale`, `preflight_stack`, `unlock`.
"""
