"""The guardrails a platform team switches on: one set of rules over resource inputs, run by
Pulumi's policy engine (`__main__.py`, `PulumiPolicy.yaml`: `pulumi preview --policy-pack
policy`, or `--policy-pack policy/analyzer`, the executable that starts the pack without a
Python language host) and by the offline review (`invoke plan` / `invoke diff`, through
`ops.review`).

Owns the node view of a resource's inputs as pulumi-gcp and the dynamic providers name them
(`nodes`), a node's price from the price table (`prices`) and the rules with their defaults and
the pack config they read (`rules`). No pulumi-policy import outside `__main__.py`. May import
nothing of the project but `model.price_table` (the table's one reader, standalone: the standard
library and PyYAML): the pack runs on its own under Pulumi's analyzer. `ops.review` imports it;
it never imports `ops`, `infra` or `tasks`. Verbs: `evaluate`, `load_pack_config`, `RULES`.
"""
