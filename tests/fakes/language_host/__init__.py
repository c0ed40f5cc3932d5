"""A `pulumi-language-python` for the engine built here (a test double, like
tests/fakes/standin_gcp).

The engine built from source has no Python language host (released CLIs bundle the real one),
so this one answers the engine's LanguageRuntime calls (`host.py`, on the gRPC stubs the pulumi
SDK ships) and runs the program named by Pulumi.yaml's `main` in a subprocess of the
project's virtualenv (`program.py`, the runner; forked from the test worker's warm interpreter,
tests/support/warm_python.py, when that is the same virtualenv), so `pulumi
preview/up/refresh/destroy` run through the CLI in tests. `pulumi-language-python` beside this
file is the executable the engine starts: put this folder on the engine's PATH.

The host imports grpc and the SDK's protocol files only (tests/fakes/pulumi_protos.py), the
runner the SDK: nothing from `infra`, `ops`, `bootstrap` or `tasks`.
"""
