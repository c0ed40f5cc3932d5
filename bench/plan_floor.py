"""The fair floor for `invoke plan`: a minimal program registering the same resources.

`python bench/plan_floor.py PLAN.json` reads a plan `invoke plan` wrote and, in a fresh
interpreter under pulumi's own mock engine (`pulumi.runtime.set_mocks`, as the planner uses),
registers one resource per entry with the same type token, name and inputs: each pulumi-gcp
type through its module (so the floor pays the same pulumi_gcp imports), each component as a
`ComponentResource`, each dynamic resource with a do-nothing dynamic provider. What `invoke
plan` costs above this is the project's own: reading and validating the cluster YAML, the node
plan, the startup scripts, the recording and the JSON.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from typing import Any

import pulumi
import pulumi.dynamic
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

DYNAMIC_PREFIX = "pulumi-python:dynamic/"  # `pulumi-python:dynamic/ray-gcp:WorkerGroup`


class EchoMocks(pulumi.runtime.Mocks):
    """Every resource's state is its inputs, as a preview shows them."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        return f"{args.name}-id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        return {}


class NoopProvider(pulumi.dynamic.ResourceProvider):
    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        return pulumi.dynamic.CreateResult(id_="noop", outs=props)


@functools.cache
def noop_resource(token: str) -> type[pulumi.dynamic.Resource]:
    """A dynamic resource class of one of the plan's type tokens."""
    module, name = token.removeprefix(DYNAMIC_PREFIX).split(":")
    return type(name, (pulumi.dynamic.Resource,), {}, module=module, name=name)


def register(resource: dict[str, Any]) -> None:
    token, name, inputs = resource["type"], resource["name"], resource["inputs"]
    if token.startswith(DYNAMIC_PREFIX):
        noop_resource(token)(NoopProvider(), name, {k: v for k, v in inputs.items()
                                                    if k != "__provider"})
    elif not resource["custom"]:
        pulumi.ComponentResource(token, name)
    else:
        _, module_path, class_name = token.split(":")
        module = importlib.import_module(f"pulumi_gcp.{module_path.split('/')[0]}")
        getattr(module, class_name)  # loads the class's module, as constructing one does
        pulumi.CustomResource(token, name, inputs)


def main(plan_path: str) -> None:
    with open(plan_path) as handle:
        plan = json.load(handle)
    pulumi.runtime.set_mocks(EchoMocks(), project="ray-gcp", stack=plan["stack"], preview=True)

    async def program() -> None:
        for resource in plan["resources"]:
            register(resource)

    _sync_await(run_pulumi_func(program))


if __name__ == "__main__":
    main(sys.argv[1])
