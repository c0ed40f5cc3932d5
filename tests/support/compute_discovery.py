"""Compute Engine's published schema: the compute v1 discovery document google-api-python-client
ships (`googleapiclient/discovery_cache/documents/compute.v1.json`), Google's own description
of every method (verb, path template, parameters) and resource field, read by the tests that
hold the product's REST calls and request bodies to it."""

from __future__ import annotations

from typing import Any

from tests.fakes.compute.discovery import discovery_document, discovery_methods

DOCUMENT = "compute.v1"


def compute_document() -> dict[str, Any]:
    return discovery_document(DOCUMENT)


def methods() -> dict[str, dict[str, Any]]:
    """Every method by its id without the `compute.` prefix (`instances.get`)."""
    return {method_id.removeprefix("compute."): method
            for method_id, method in discovery_methods(DOCUMENT).items()}


def unknown_fields(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """The paths in `value` (a request body's JSON) that `schema` (a discovery schema, or
    {"$ref": name}) does not describe."""
    if "$ref" in schema:
        schema = compute_document()["schemas"][schema["$ref"]]
    if isinstance(value, list) and "items" in schema:
        return [field for index, item in enumerate(value)
                for field in unknown_fields(item, schema["items"], f"{path}[{index}]")]
    if not isinstance(value, dict):
        return []
    if "properties" not in schema:
        extra = schema.get("additionalProperties")
        return [field for key, item in value.items()
                for field in unknown_fields(item, extra, f"{path}.{key}")] if extra else []
    found = []
    for key, item in value.items():
        if key not in schema["properties"]:
            found.append(f"{path}.{key}")
        else:
            found += unknown_fields(item, schema["properties"][key], f"{path}.{key}")
    return found
