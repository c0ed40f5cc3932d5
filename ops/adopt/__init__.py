"""`invoke adopt -c cluster.yaml`: a running cluster `ray up` made, taken over by a new stack
without touching a node (issue 38).

Owns finding the cluster by Ray's labels in the YAML's project and zone and reading what Ray's
launcher made around it (`cloud`: instances, the `ray-autoscaler-sa-v1` account and its roles,
Ray's SSH key in the project metadata, firewall rules), judging what can be taken over and
what cannot (`survey`, pure), saying so (`report`), and the adoption itself (`run`: the stack
file with `ray-gcp:adopt`, a preview that must replace and delete nothing, the question, the
up). May import `infra`, the shared top of `ops` and `ops.lifecycle` (the stack for a YAML and
the operations); only `tasks.py` imports it. Verb: `adopt`.
"""
