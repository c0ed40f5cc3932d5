"""Offline plan review: `invoke plan`, `invoke diff`, `invoke changed-stacks`, and the prices.

Owns running the real program under a mock engine (`plan_engine`), the canonical plan document
(`plan`), comparing two plans and wording what each change does to a running node
(`plan_diff`, `plan_effects`, `plan_markdown`), planning a git ref's tree beside the working
tree (`plan_base`), and the dated price table with its estimates (`prices`, `price_table.yaml`).
No cloud, no pulumi CLI. May import `infra`, `bootstrap` and the shared top of `ops`
(`errors`, `paths`, `stack`); no other room. Verbs: `plan_stack`, `render`,
`diff_stack_markdown`, `changed_stacks`, `step_effect`, `cluster_price`.
"""
