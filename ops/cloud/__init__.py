"""The running cluster, asked through the Compute/TPU APIs and its nodes: `invoke status`,
`cluster-dump`, `kill-random-node`, `cost`, `autostop`, `get-head-ip` and `get-worker-ips`.

Owns the node API and its errors, and `StackApi`, one task's clients and head instance, asked
once and handed to every part that needs them (`cloud_api`), the nodes table and `ray status`
(`status`), the nodes table's rows of the workers Ray's autoscaler launched (`autoscaled`;
listed by ops.stacks.cloud_nodes, which the fan-out to every node uses too),
preemptions (`preemptions`), each node's startup script version and bootstrap stage
(`bootstrap_status`), the log archive (`cluster_dump`), failure drills (`kill_node`), what the
cluster has cost (`cost`), what the head counts against its spend cap (`spend_status`), a
running cluster's autostop (`autostop`) and its IPs (`cluster_ips`); what the cloud holds of
the cluster that no state of its stack knows, reported and deleted on request (`orphans`).
May import `model`, `infra`, `bootstrap`, the shared top of `ops`, `ops.stacks`, `ops.remote`
(to reach a node) and `ops.review.prices` (the price table); imported by `tasks.py`, and by
`ops.lifecycle` for `cloud_api` and `orphans`. Verbs: `show_status`, `dump_stack`,
`kill_stack_node`, `stack_cost_report`, `change_autostop`, `head_ip`, `worker_ips`,
`show_orphans`.
"""
