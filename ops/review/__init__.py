"""Offline plan review: `invoke plan`, `invoke diff`, `invoke changed-stacks`, and prices.

Owns running the real program under a mock engine (`plan_engine`), the canonical plan document
(`plan`; its `check_before_create` is the same plan, run before `invoke up` writes or creates),
comparing two plans (`plan_diff`: matching; `plan_values`: how a changed input is shown;
`replacements`: whether it replaces the resource), wording what each change does to a running
node (`plan_effects`, whose `step_effect` also words `invoke up`'s progress), planning a git
ref's tree beside the working tree (`plan_base`), the estimates over the dated price table
(`prices`, on `model.prices`) and the price against `provider.spend_cap` (`spend_cap`: the
projection shown, the refusal of pinned nodes over the hourly cap, which `invoke up` asks for
too). No cloud, no pulumi CLI.
May import `model`, `infra`, `bootstrap` and the shared top of `ops` (`errors`, `paths`, `engine`'s
cache folder, `pulumi_types`, `stack`); no other room. Verbs: `write_plan`,
`check_before_create`, `write_diff`, `changed_stacks`, `plan_stack`, `diff_plans`,
`step_effect`, `cluster_price`, `cap_projection`.
"""
