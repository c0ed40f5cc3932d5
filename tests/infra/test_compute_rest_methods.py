"""Every Compute call the product makes (infra/workers/compute_rest.py's METHODS, the only way
it builds a Compute URL) is a method of Compute's published discovery document, the one
google-api-python-client ships: the same verb, the same path template, only query parameters
the method takes; bulkInsert's InstanceProperties fields are that document's; and against the
fake, the answers are the API's JSON and its errors google-api-core's exceptions, as
google-cloud-compute's REST transport raised them."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from google.api_core import exceptions as api_exceptions

from infra.workers.clients import ApiClients, build_credentials
from infra.workers.compute_api import BULK_FIELDS
from infra.workers.compute_rest import METHODS, method_url
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.helpers import PROJECT, ZONE
from tests.support.compute_discovery import compute_document, methods


@pytest.fixture
def clients() -> Iterator[ApiClients]:
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        yield ApiClients(build_credentials(None, fake.endpoint), fake.endpoint)


def _template_pattern(template: str) -> re.Pattern[str]:
    """A discovery path template (`projects/{project}/zones/{zone}`) as a pattern a filled
    path matches (`{+name}`, the reserved expansion, may hold slashes)."""
    pattern = re.escape(template)
    pattern = re.sub(r"\\\{\\\+[^}]+\\\}", ".+", pattern)
    return re.compile(re.sub(r"\\\{[^}]+\\\}", "[^/]+", pattern) + "$")


@pytest.mark.parametrize("name", sorted(METHODS))
def test_each_method_is_computes_own_verb_path_and_query_parameters(name: str) -> None:
    published = methods()[name]
    ours = METHODS[name]
    assert ours.http == published["httpMethod"]
    assert ours.path in (published.get("flatPath"), published["path"])
    query = {key for key, parameter in published.get("parameters", {}).items()
             if parameter["location"] == "query"}
    assert ours.query <= query, ours.query - query


@pytest.mark.parametrize("name", sorted(METHODS))
def test_each_url_built_is_the_documents_root_and_path_filled(name: str) -> None:
    document, published = compute_document(), methods()[name]
    names = re.findall(r"\{([^}]+)\}", METHODS[name].path)
    url, query = method_url(None, name, {key: f"v-{key}" for key in names})
    root = document["rootUrl"] + document["servicePath"]
    assert url.startswith(root) and query == {}
    assert _template_pattern(published["flatPath"]).match(url.removeprefix(root))
    at_fake, _ = method_url("127.0.0.1:9", name, {key: f"v-{key}" for key in names})
    assert at_fake == "http://127.0.0.1:9/" + document["servicePath"] + url.removeprefix(root)


def test_a_parameter_the_method_does_not_take_is_refused_before_any_call() -> None:
    with pytest.raises(TypeError, match="unknown \\['page_token'\\]"):
        method_url(None, "instances.list", {"project": "p", "zone": "z", "page_token": "t"})
    with pytest.raises(TypeError, match="missing \\['zone'\\]"):
        method_url(None, "instances.get", {"project": "p", "instance": "i"})


def test_bulk_insert_fields_are_the_documents_instance_properties() -> None:
    assert set(compute_document()["schemas"]["InstanceProperties"]["properties"]) == BULK_FIELDS


def test_answers_are_the_apis_json_with_enum_names(clients: ApiClients) -> None:
    body = {"name": "w", "machineType": f"zones/{ZONE}/machineTypes/n1-standard-2",
            "scheduling": {"provisioningModel": "SPOT"},
            "disks": [{"boot": True, "initializeParams": {"sourceImage": "x"}}],
            "networkInterfaces": [{"network": "global/networks/default"}]}
    operation = clients.compute.call("instances.insert", body, project=PROJECT, zone=ZONE,
                                     requestId="5f1d3a52-0000-4000-8000-000000000001")
    done = clients.compute.call("zoneOperations.wait", project=PROJECT, zone=ZONE,
                                operation=operation["name"])
    assert done["status"] == "DONE"
    instance = clients.compute.call("instances.get", project=PROJECT, zone=ZONE, instance="w")
    assert instance["status"] == "RUNNING"
    assert instance["scheduling"]["provisioningModel"] == "SPOT"
    assert instance["networkInterfaces"][0]["networkIP"]


def test_an_error_answer_is_google_api_cores_exception_for_its_status(
        clients: ApiClients) -> None:
    with pytest.raises(api_exceptions.NotFound) as missing:
        clients.compute.call("instances.get", project=PROJECT, zone=ZONE, instance="nope")
    assert missing.value.response.status_code == 404
    assert "nope" in missing.value.message


def test_fields_the_json_leaves_out_read_as_compute_v1s_defaults_did() -> None:
    """JSON omits what is unset (no access config, no scheduling, no labels): an instance
    with only a name has no addresses and is on-demand."""
    from infra.workers.compute_api import addresses, instance_market

    assert addresses({"name": "w"}) == (None, None)
    assert addresses({"name": "w", "networkInterfaces": [{"networkIP": "10.0.0.3"}]}) == \
        ("10.0.0.3", None)
    assert instance_market({"name": "w"}) == "on-demand"
    assert instance_market({"name": "w", "scheduling": {"provisioningModel": "SPOT"}}) == "spot"
    assert instance_market({"name": "w", "scheduling": {"preemptible": True}}) == "spot"
