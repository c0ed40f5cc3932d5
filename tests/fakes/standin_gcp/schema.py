"""What pulumi-gcp's schema refuses, read from the installed pulumi-gcp SDK's input types.

Each resource token names its `*Args` input class (`gcp:compute/instance:Instance` ->
`pulumi_gcp.compute.InstanceArgs`); its properties carry the wire names, types and which are
required, as pulumi-gcp's schema generated them. A property the schema does not know, a
required one missing or a value of the wrong kind is a check failure, worded as the Terraform
bridge words it.
"""

from __future__ import annotations

import collections.abc
import importlib
import typing
from typing import Any

import pulumi
from pulumi import _types

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
Failure = tuple[str, str]  # (property path, reason)


def args_class(token: str) -> type:
    """The SDK's input class for a resource token (or the provider's, `pulumi:providers:gcp`)."""
    if token == "pulumi:providers:gcp":
        return importlib.import_module("pulumi_gcp").ProviderArgs
    module = token.split(":")[1].split("/")[0]
    name = token.rsplit(":", 1)[1] + "Args"
    return getattr(importlib.import_module(f"pulumi_gcp.{module}"), name)


def check(token: str, inputs: dict[str, Any]) -> list[Failure]:
    """Every way `inputs` breaks the schema of `token`'s resource, in property order."""
    return _check_object(args_class(token), inputs, "")


def _check_object(cls: type, value: Any, path: str) -> list[Failure]:
    if not isinstance(value, dict):
        return [(path, f"expected an object, got {type(value).__name__}")]
    types = _types.input_type_types(cls)
    failures: list[Failure] = []
    for name in sorted(_types._required_property_names(cls)):
        if value.get(name) is None:
            failures.append((_join(path, name), f"Missing required property '{name}'"))
    for name, item in value.items():
        where = _join(path, name)
        if name not in types:
            failures.append((where, f"Invalid or unknown key: '{name}'"))
        elif item is not None:
            failures += _check_value(types[name], item, where)
    return failures


def _check_value(hint: Any, value: Any, path: str) -> list[Failure]:
    if value == UNKNOWN:
        return []
    hint = _types.unwrap_type(hint)
    hint = _plain(hint)
    origin = typing.get_origin(hint)
    if origin in (list, collections.abc.Sequence, typing.Sequence):
        if not isinstance(value, list):
            return [(path, f"expected a list, got {type(value).__name__}")]
        (element,) = typing.get_args(hint)
        return [f for i, v in enumerate(value) for f in _check_value(element, v, f"{path}[{i}]")]
    if origin in (dict, collections.abc.Mapping, typing.Mapping):
        if not isinstance(value, dict):
            return [(path, f"expected a map, got {type(value).__name__}")]
        _, element = typing.get_args(hint)
        return [f for k, v in value.items() for f in _check_value(element, v, f"{path}.{k}")]
    if isinstance(hint, type) and _types.is_input_type(hint):
        return _check_object(hint, value, path)
    expected = {str: (str,), bool: (bool,), int: (int, float), float: (int, float)}.get(hint)
    if expected and (not isinstance(value, expected) or (hint is not bool and value is True)):
        return [(path, f"expected {hint.__name__}, got {type(value).__name__}")]
    return []


def _plain(hint: Any) -> Any:
    """`Union[T, Awaitable[T], Output[T]]` (an element's Input) as T; Any stays Any."""
    if typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint)
                if a is not type(None) and typing.get_origin(a) is not collections.abc.Awaitable
                and typing.get_origin(a) is not pulumi.Output and a is not pulumi.Output]
        if len(args) == 1:
            return _plain(_types.unwrap_type(args[0]))
    return hint


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
