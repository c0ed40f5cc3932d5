"""Questions about a running cluster, to the Compute/TPU APIs and its nodes: `invoke status`,
`cost`, `autostop`, `kill-random-node`, `get-head-ip`, `get-worker-ips`.

Owns the API clients and their errors (`cloud_api`), the nodes table and `ray status`
(`status`), preemptions (`preemptions`), each node's startup script version and bootstrap
stage (`bootstrap_status`), what the cluster has cost (`cost`), changing a running cluster's
autostop (`autostop`), failure drills (`kill_node`) and the stack's IPs (`cluster_ips`). May
import `infra`, `bootstrap`, the shared top of `ops`, `ops.remote` (to reach a node) and
`ops.review.prices` (the price table); nothing imports it but `tasks.py` and
`ops.lifecycle`. Verbs: `nodes_table`, `ray_status`, `preemption_lines`, `bootstrap_table`,
`cost_report`, `set_autostop`, `kill_random_node`, `head_ip`, `worker_ips`.
"""
