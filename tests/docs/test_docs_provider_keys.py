"""The table of extensions under `provider` (docs/your-yaml.md) lists exactly the provider keys
the config model takes that Ray's own schema (ray-schema.json in Ray's wheel) does not have."""

from __future__ import annotations

import json
from pathlib import Path

import ray.autoscaler

from tests.support.docs_pages import section, table_rows


def test_the_extensions_table_lists_every_provider_key_ray_does_not_have() -> None:
    from model.config.cluster import Provider

    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    rays = set(schema["properties"]["provider"]["properties"])
    header, *rows = table_rows(section("your-yaml.md", "## Extensions under `provider`"))
    assert header[0] == "key"
    assert {row[0].strip("`") for row in rows} == set(Provider.model_fields) - rays
