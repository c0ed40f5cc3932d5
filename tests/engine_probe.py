"""A dynamic resource whose provider reports the process it runs in: its pid and sys.prefix.

Imported by name in the engine's `pulumi-python` plugin process, which unpickles the provider
there (the project root on its PYTHONPATH makes `tests.engine_probe` importable)."""

from __future__ import annotations

import os
import sys
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, Resource, ResourceProvider


class WhereProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_="where", outs={"pid": os.getpid(), "prefix": sys.prefix})


class Where(Resource, module="probe", name="Where"):
    pid: pulumi.Output[int]
    prefix: pulumi.Output[str]

    def __init__(self, name: str) -> None:
        super().__init__(WhereProvider(), name, {"pid": None, "prefix": None})
