"""Google's published API descriptions: the discovery documents google-api-python-client ships
(`googleapiclient/discovery_cache/documents/<name>.json`), each read once per process (compute's
is 5 MB of JSON), and their methods by id. The fakes take each method's accepted scopes from
them; the tests hold the product's REST calls and bodies to them (tests/support)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import googleapiclient

DOCUMENTS = Path(googleapiclient.__file__).parent / "discovery_cache" / "documents"


@cache
def discovery_document(name: str) -> dict[str, Any]:
    """The document `name` (`compute.v1`, `storage.v1`, ...)."""
    return json.loads((DOCUMENTS / f"{name}.json").read_text())


@cache
def discovery_methods(name: str) -> dict[str, dict[str, Any]]:
    """Every method of document `name` by its full id (`compute.instances.get`)."""
    found: dict[str, dict[str, Any]] = {}
    resources = [discovery_document(name)]
    while resources:
        resource = resources.pop()
        for method in (resource.get("methods") or {}).values():
            found[method["id"]] = method
        resources.extend((resource.get("resources") or {}).values())
    return found
