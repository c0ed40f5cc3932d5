"""The ground floor: what a cluster is, as data, before any cloud call or node script.

Owns the cluster YAML's model (`config/`: defaults, normalisation, every config check, the
offline catalog of Google Cloud names and the GCP defaults, both YAML files beside it), the node
plan (`plan`: which nodes, names, zones and accounts a config makes), who each node runs as
(`identities`: accounts, scopes, grants and the names of the secrets and bucket they read),
Ray's and our labels (`labels`), the dated price table (`price_table.yaml`), its one reader
(`price_table`: standalone, the policy pack imports it) and the node prices (`prices`), rsync's
exclude and filter rules (`sync_filter`), YAML files read with one-line errors (`yaml_text`), a
stack's own file and the local state folder (`stack_config`), what a stack adopting a `ray up`
cluster takes over (`adoption`, its `ray-gcp:adopt`) and writing files only their owner
reads (`private_files`: 0600 files in 0700 folders; here, not a package of its own, because
`stack_config`'s state folder is made with it and the bootstrap's archive and local cluster
write secrets with it: one ground floor, one rule). Beside the data, one rule every entry
point of ours shares: a short-lived process ends without CPython's last collections
(`quick_exit`, standard library).

May import the standard library, pydantic, yaml and other `model` modules: no pulumi, no
cloud client, nothing of the project above it (`bootstrap`, `infra`, `policy`, `ops`, `tasks`
stand on it; tests/project/test_import_graph.py checks). This package's `__init__` imports nothing,
so `invoke` reads a stack file through `stack_config` without pydantic.
"""
