"""Owns what runs on a node: the startup script that makes a GCE instance or TPU VM a Ray head
or worker, the file_mounts archive it fetches from the cluster's bucket, the head's autoscaler
config and its node provider (`head_provider/`, shipped to the head in metadata by
`head_provider_metadata`), and a local two-node cluster built from the same scripts.

May import only `model` (the cluster config, Ray's labels, prices, sync filters, the local
state folder), never `infra` (which stands on bootstrap: it puts these scripts in metadata),
`policy`, `ops` or `tasks`; `head_provider/` imports nothing of the project (see its
docstring), and infra/workers imports its `capacity` rules (tests/project/test_import_graph.py).

The package re-exports nothing: its modules are imported by name, so a process that needs only
`head_provider`'s capacity rules (the dynamic providers' plugin, started for every engine
run) does not load the config model with them."""
