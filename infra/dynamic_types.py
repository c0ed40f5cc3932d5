"""The dynamic resources' own type tokens, and aliases to the type they all shared before.

`pulumi preview` shows a dynamic resource by its type token. Declared as
`class X(Resource, module=MODULE, name="X")` (pulumi.dynamic's `__init_subclass__`), a
WorkerGroup is `pulumi-python:dynamic/ray-gcp:WorkerGroup` instead of the shared
`pulumi-python:dynamic:Resource`; a type is part of the URN, so `legacy_aliases` tells the
engine that a resource of a stack created under the shared type is the same resource.
"""

from __future__ import annotations

import pulumi

MODULE = "ray-gcp"
LEGACY_TYPE = "pulumi-python:dynamic:Resource"


def type_token(name: str) -> str:
    """What pulumi.dynamic makes of `module=MODULE, name=name`."""
    return f"pulumi-python:dynamic/{MODULE}:{name}"


WORKER_GROUP_TYPE = type_token("WorkerGroup")
CLUSTER_SWEEPER_TYPE = type_token("ClusterSweeper")
QUEUED_TPU_SLICE_TYPE = type_token("QueuedTpuSlice")
KEY_PAIR_TYPE = type_token("GeneratedKeyPair")
STACK_SECRET_TYPE = type_token("StackSecret")  # born with its own type: no legacy alias
DYNAMIC_TYPES = (WORKER_GROUP_TYPE, CLUSTER_SWEEPER_TYPE, QUEUED_TPU_SLICE_TYPE, KEY_PAIR_TYPE,
                 STACK_SECRET_TYPE)


def legacy_aliases(opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """`opts` plus an alias to the legacy type under the same name, and one to the legacy type
    for each alias the caller gave without a type (a resource renamed before it had its own
    type was known by its old name and the legacy type)."""
    given = (opts.aliases if opts is not None else None) or []
    aliases = [pulumi.Alias(type_=LEGACY_TYPE)]
    aliases += [
        pulumi.Alias(name=alias.name, type_=LEGACY_TYPE, parent=alias.parent, stack=alias.stack,
                     project=alias.project)
        for alias in given
        if isinstance(alias, pulumi.Alias) and alias.type_ is Ellipsis
    ]
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases))
