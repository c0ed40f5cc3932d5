"""A stand-in for the `gcp` resource provider plugin (pulumi-gcp), for engine tests.

The real plugin cannot be installed here, so this one answers the engine's ResourceProvider
calls in its place (`server.py`, on the gRPC stubs the pulumi SDK ships, loaded without the SDK:
tests/fakes/pulumi_protos.py) for every resource
type and data source the program uses, acting on the fake cloud's REST APIs
(tests/fakes/compute) at the endpoints pulumi-gcp's `*CustomEndpoint` settings name. It checks
inputs against pulumi-gcp's schema as the installed SDK's input types state it (`schema.py`)
and decides update vs replace by terraform-provider-google's `ForceNew` fields
(`replace_rules.py`).

It is an independent counterpart of the program: it imports nothing from `infra`, `ops` or
`bootstrap`, so where it and our offline plan disagree, one of them is wrong.
`pulumi-resource-gcp` (beside this file) is the executable the engine runs: put this folder
on PATH, or `install_plugin` it into a PULUMI_HOME's plugin cache.
"""
