"""The Pulumi program: a Ray cluster YAML in, pulumi-gcp resources out.

Owns the program (`program`, `__main__`), the pulumi resources of the cluster (network, IAM,
bucket, secrets, nodes, TPU slices), the dynamic providers of the worker groups and the
sweeper (`workers/`, pickled into state by module path: keep their paths), and the calls to
Google's APIs they and `catalog_refresh` make.

May import `model` (the ground floor: config, plan, labels, identities) and `bootstrap` (the
node scripts and archive it puts in metadata and the bucket); never `policy`, `ops` or
`tasks` (tests/project/test_import_graph.py).
"""
