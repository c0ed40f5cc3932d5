"""What pulumi-gcp's schema refuses, read from the installed pulumi-gcp SDK's input types.

Each resource token names its `*Args` input class (`gcp:compute/instance:Instance` ->
`pulumi_gcp.compute.InstanceArgs`); its properties carry the wire names, types and which are
required, as pulumi-gcp's schema generated them. A property the schema does not know, a
required one missing or a value of the wrong kind is a check failure, worded as the Terraform
bridge words it.
"""

from __future__ import annotations

import collections.abc
import hashlib
import importlib
import importlib.metadata
import json
import os
import tempfile
import typing
from pathlib import Path
from typing import Any

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
Failure = tuple[str, str]  # (property path, reason)
Shape = dict[str, Any]
"""What the SDK's input types say of a value, as plain data: `{"object": {"required": [...],
"props": {name: Shape}}}`, `{"list": Shape}`, `{"map": Shape}`, `{"scalar": "str"|"bool"|
"int"|"float"}` or `{"any": true}`."""

CACHE_ENV = "STANDIN_GCP_SCHEMA_CACHE"
"""Where the shapes read from the SDK are kept (default `~/.cache/ray-gcp-pulumi/
standin-schema`): importing pulumi-gcp's modules is most of a stand-in plugin's start (seconds
for `pulumi_gcp.compute`), and the engine starts one for every run. A shape is read from the SDK
once per pulumi-gcp version and this file's text, then from its JSON file."""


def args_class(token: str) -> type:
    """The SDK's input class for a resource token (or the provider's, `pulumi:providers:gcp`)."""
    if token == "pulumi:providers:gcp":
        return importlib.import_module("pulumi_gcp").ProviderArgs
    module = token.split(":")[1].split("/")[0]
    name = token.rsplit(":", 1)[1] + "Args"
    return getattr(importlib.import_module(f"pulumi_gcp.{module}"), name)


def check(token: str, inputs: dict[str, Any]) -> list[Failure]:
    """Every way `inputs` breaks the schema of `token`'s resource, in property order."""
    return _check_object(shape_of(token)["object"], inputs, "")


def shape_of(token: str) -> Shape:
    """The shape of `token`'s inputs: from the cache, else read from the SDK and kept."""
    folder = _cache_folder()
    path = folder / (token.replace(":", "_").replace("/", "_") + ".json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    shape = _object_shape(args_class(token), frozenset())
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as out:
        json.dump(shape, out)
    os.replace(out.name, path)  # whole or not at all, whichever stand-in writes it
    return shape


def default_cache() -> Path:
    """The cache folder of the user running this: XDG_CACHE_HOME's, else ~/.cache's."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") \
        / "ray-gcp-pulumi" / "standin-schema"


def _cache_folder() -> Path:
    base = os.environ.get(CACHE_ENV) or default_cache()
    source = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    return Path(base) / f"pulumi-gcp-{importlib.metadata.version('pulumi_gcp')}-{source}"


def _object_shape(cls: type, seen: frozenset[type]) -> Shape:
    from pulumi import _types

    if cls in seen:  # an input type inside itself: its inner values go unchecked
        return {"any": True}
    types = _types.input_type_types(cls)
    return {"object": {"required": sorted(_types._required_property_names(cls)),
                       "props": {name: _shape(hint, seen | {cls})
                                 for name, hint in types.items()}}}


def _shape(hint: Any, seen: frozenset[type]) -> Shape:
    from pulumi import _types

    hint = _plain(_types.unwrap_type(hint))
    origin = typing.get_origin(hint)
    if origin in (list, collections.abc.Sequence, typing.Sequence):
        (element,) = typing.get_args(hint)
        return {"list": _shape(element, seen)}
    if origin in (dict, collections.abc.Mapping, typing.Mapping):
        _, element = typing.get_args(hint)
        return {"map": _shape(element, seen)}
    if isinstance(hint, type) and _types.is_input_type(hint):
        return _object_shape(hint, seen)
    scalar = {str: "str", bool: "bool", int: "int", float: "float"}.get(hint)
    return {"scalar": scalar} if scalar else {"any": True}


def _check_object(shape: Shape, value: Any, path: str) -> list[Failure]:
    if not isinstance(value, dict):
        return [(path, f"expected an object, got {type(value).__name__}")]
    props = shape["props"]
    failures: list[Failure] = []
    for name in shape["required"]:
        if value.get(name) is None:
            failures.append((_join(path, name), f"Missing required property '{name}'"))
    for name, item in value.items():
        where = _join(path, name)
        if name not in props:
            failures.append((where, f"Invalid or unknown key: '{name}'"))
        elif item is not None:
            failures += _check_value(props[name], item, where)
    return failures


SCALARS: dict[str, tuple[type, ...]] = {"str": (str,), "bool": (bool,), "int": (int, float),
                                        "float": (int, float)}


def _check_value(shape: Shape, value: Any, path: str) -> list[Failure]:
    if value == UNKNOWN:
        return []
    if "list" in shape:
        if not isinstance(value, list):
            return [(path, f"expected a list, got {type(value).__name__}")]
        return [f for i, v in enumerate(value)
                for f in _check_value(shape["list"], v, f"{path}[{i}]")]
    if "map" in shape:
        if not isinstance(value, dict):
            return [(path, f"expected a map, got {type(value).__name__}")]
        return [f for k, v in value.items() for f in _check_value(shape["map"], v, f"{path}.{k}")]
    if "object" in shape:
        return _check_object(shape["object"], value, path)
    scalar = shape.get("scalar")
    if scalar and (not isinstance(value, SCALARS[scalar])
                   or (scalar != "bool" and value is True)):
        return [(path, f"expected {scalar}, got {type(value).__name__}")]
    return []


def _plain(hint: Any) -> Any:
    """`Union[T, Awaitable[T], Output[T]]` (an element's Input) as T; Any stays Any."""
    import pulumi
    from pulumi import _types

    if typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint)
                if a is not type(None) and typing.get_origin(a) is not collections.abc.Awaitable
                and typing.get_origin(a) is not pulumi.Output and a is not pulumi.Output]
        if len(args) == 1:
            return _plain(_types.unwrap_type(args[0]))
    return hint


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
