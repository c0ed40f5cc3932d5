"""A dynamic resource whose provider reports the process it runs in: its pid and sys.prefix.

Imported by name in the engine's `pulumi-python` plugin process, which unpickles the provider
there (the project root on its PYTHONPATH makes `tests.support.engine_probe` importable)."""

from __future__ import annotations

import os
import sys
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, Resource, ResourceProvider

from infra.dynamic_types import legacy_aliases


class WhereProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_="where", outs={"pid": os.getpid(), "prefix": sys.prefix})


class Where(Resource, module="probe", name="Where"):
    """Of its own type, aliased to the shared one as the project's dynamic resources are."""

    pid: pulumi.Output[int]
    prefix: pulumi.Output[str]

    def __init__(self, name: str) -> None:
        super().__init__(WhereProvider(), name, {"pid": None, "prefix": None},
                         legacy_aliases(None))


class LegacyWhere(Resource):
    """The same resource as a release before the own types declared it: the shared type."""

    def __init__(self, name: str) -> None:
        super().__init__(WhereProvider(), name, {"pid": None, "prefix": None})
