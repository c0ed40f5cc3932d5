"""Every field of the Compute v1 `Instance` and TPU v2 `Node` bodies, as the discovery
documents google-api-python-client ships define them, is taken by our node_config model or
refused with a stated reason (output-only fields are refused as unknown keys)."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

import pytest
import yaml

from model.config import ComputeNodeConfig, ConfigError, TpuNodeConfig, parse_cluster_config
from model.config.node_config import ApiModel
from tests.fakes.compute.discovery import discovery_document
from tests.support.program_runs import PROJECT_ROOT


def schemas(document: str) -> dict[str, Any]:
    return discovery_document(document)["schemas"]


def output_only(prop: dict[str, Any]) -> bool:
    return "output only" in prop.get("description", "").lower()


def nested_models(annotation: Any) -> list[type[ApiModel]]:
    if isinstance(annotation, type) and issubclass(annotation, ApiModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in nested_models(arg)]


def literal_values(annotation: Any) -> set[str]:
    if typing.get_origin(annotation) is Literal:
        return set(typing.get_args(annotation))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list):
        return {v for arg in typing.get_args(annotation) for v in literal_values(arg)}
    return set()


def walk(all_schemas: dict[str, Any], name: str, model: type[ApiModel], path: str,
         found: dict[str, list[str]]) -> None:
    """Fill found["missing"], found["bad_enum"], found["stale_refusal"] along the schema."""
    properties = all_schemas[name]["properties"]
    fields = {field.alias or key: field for key, field in model.model_fields.items()}
    assert model.model_config.get("extra") == "forbid", model
    found["stale_refusal"] += [f"{path}.{key}" for key in model.refused if key not in properties]
    for key, prop in properties.items():
        where = f"{path}.{key}"
        if key not in fields:
            if key not in model.refused and not output_only(prop):
                found["missing"].append(where)
            continue
        annotation = fields[key].annotation
        enum = prop.get("enum") or prop.get("items", {}).get("enum")
        if enum and not literal_values(annotation) <= set(enum):
            found["bad_enum"].append(where)
        ref = prop.get("$ref") or prop.get("items", {}).get("$ref")
        for nested in nested_models(annotation):
            if ref:
                walk(all_schemas, ref, nested, where, found)


@pytest.mark.parametrize(("document", "schema", "model"), [
    ("compute.v1", "Instance", ComputeNodeConfig),
    ("tpu.v2", "Node", TpuNodeConfig),
])
def test_every_api_field_is_taken_or_refused_with_a_reason(document, schema, model):
    found: dict[str, list[str]] = {"missing": [], "bad_enum": [], "stale_refusal": []}
    walk(schemas(document), schema, model, schema, found)
    assert found == {"missing": [], "bad_enum": [], "stale_refusal": []}


def taken_fields(model: type[ApiModel]) -> list[tuple[str, Any]]:
    """(API key, pydantic field) of each field the model puts in a body."""
    return [(field.alias or name, field) for name, field in model.model_fields.items()
            if not field.exclude]


def unsendable(model: type[ApiModel], message: Any, path: str) -> list[str]:
    """Fields the model takes that the client's protobuf message cannot carry; and refused
    "no such field" keys that it could."""
    fields = {f.json_name: f for f in message.fields}
    found = [f"{path}.{key} (refused, but the client has it)"
             for key, why in model.refused.items() if "no such field" in why and key in fields]
    for alias, field in taken_fields(model):
        if alias not in fields:
            found.append(f"{path}.{alias}")
            continue
        for nested in nested_models(field.annotation):
            if fields[alias].message_type is not None:
                found += unsendable(nested, fields[alias].message_type, f"{path}.{alias}")
    return found


def test_every_taken_compute_field_is_in_the_instance_body_google_publishes():
    """The WorkerGroup sends a compute type's body to `instances.insert` as JSON: every field
    the model takes is one the discovery document's `Instance` has, at every depth."""
    assert unpublished(schemas("compute.v1"), "Instance", ComputeNodeConfig,
                       "Instance") == []


def unpublished(all_schemas: dict[str, Any], name: str, model: type[ApiModel],
                path: str) -> list[str]:
    """Fields the model takes that schema `name` does not describe."""
    properties = all_schemas[name]["properties"]
    found = []
    for alias, field in taken_fields(model):
        if alias not in properties:
            found.append(f"{path}.{alias}")
            continue
        prop = properties[alias]
        ref = prop.get("$ref") or prop.get("items", {}).get("$ref") \
            or prop.get("additionalProperties", {}).get("$ref")
        for nested in nested_models(field.annotation):
            found += unpublished(all_schemas, ref, nested, f"{path}.{alias}") if ref else \
                [f"{path}.{alias} (an object where Google has a {prop.get('type')})"]
    return found


def test_every_taken_tpu_field_is_one_the_tpu_client_can_send():
    """Queued TPU requests parse each body into google-cloud-tpu's `tpu_v2` messages: a field
    its version lacks would fail at deploy, so the model refuses it up front. (The client is
    imported here, not at collection.)"""
    from google.cloud import tpu_v2

    assert unsendable(TpuNodeConfig, tpu_v2.Node.pb().DESCRIPTOR, "Node") == ["Node.machineType"]


def full_yaml() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())


def refusal(node_config_patch: dict, node_type: str = "ray_worker_small") -> dict[str, str]:
    raw = full_yaml()
    raw["available_node_types"][node_type]["node_config"].update(node_config_patch)
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(raw)
    return dict(caught.value.problems)


def test_a_refused_field_says_why_at_its_path():
    path = "available_node_types.ray_worker_small.node_config"
    assert "the plan names every node" in refusal({"name": "my-node"})[f"{path}.name"]
    found = refusal({"instanceEncryptionKey": {"rawKey": "abc"}})
    assert "plain text" in found[f"{path}.instanceEncryptionKey.rawKey"]
    assert "abc" not in " ".join(found.values())


def test_an_output_only_or_unknown_field_is_refused_by_path():
    found = refusal({"cpuPlatform": "Intel", "disks": [{"boot": True, "savedState": "X"}]})
    path = "available_node_types.ray_worker_small.node_config"
    assert "unknown key" in found[f"{path}.cpuPlatform"]
    assert "unknown key" in found[f"{path}.disks[0].savedState"]


def test_new_fields_round_trip_to_the_same_api_json():
    written = {"reservationAffinity": {"consumeReservationType": "ANY_RESERVATION"},
               "scheduling": {"maxRunDuration": {"seconds": 600},
                              "instanceTerminationAction": "DELETE"},
               "networkPerformanceConfig": {"totalEgressBandwidthTier": "TIER_1"}}
    raw = full_yaml()
    raw["available_node_types"]["ray_worker_small"]["node_config"] = {
        "machineType": "n2-standard-4", **written}
    body = parse_cluster_config(raw).available_node_types["ray_worker_small"].node_config.body()
    assert {key: body[key] for key in written} == written
