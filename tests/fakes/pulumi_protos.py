"""pulumi's protocol buffers and gRPC stubs, the files the installed SDK ships in
`pulumi/runtime/proto`, loaded without running the SDK's own `__init__`.

The test doubles that stand in for the engine's plugins (the stand-in gcp plugin, the Python
language host) speak only the protocol, as the Go programs they replace do; `import pulumi`
would run the whole SDK's start-up first (0.16 CPU-s of each start: the engine starts one of
each for every run). The files are read from where the SDK is installed, as a package of their
own (`_pulumi_protos`, whose `__init__` is not run, so only the modules asked for load). Their
messages are the SDK's own: a process that imports `pulumi` as well gets the same classes.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

PACKAGE = "_pulumi_protos"


def proto_modules(*names: str) -> list[types.ModuleType]:
    """The modules `names` of pulumi/runtime/proto (`provider_pb2`, `language_pb2_grpc`, ...)."""
    if PACKAGE not in sys.modules:
        spec = importlib.util.find_spec("pulumi")  # finds the SDK without importing it
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError("the pulumi SDK is not installed", name="pulumi")
        package = types.ModuleType(PACKAGE, __doc__)
        package.__path__ = [str(Path(spec.origin).parent / "runtime" / "proto")]
        sys.modules[PACKAGE] = package
    return [importlib.import_module(f"{PACKAGE}.{name}") for name in names]
