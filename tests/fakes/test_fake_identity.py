"""The fake Google APIs refuse what Google refuses for who is calling: a call without a token
that was minted, a token without a scope the method's discovery document lists, a principal
without the IAM permission (its project's bindings or the resource's own), and an instance
that would run as a service account the caller may not act as. Driven through the real
clients, as the product and Ray drive them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
from google.api_core.exceptions import Forbidden
from google.oauth2.credentials import Credentials
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from infra.workers.clients import ApiClients, build_credentials
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.identity import ROLE_PERMISSIONS, USER, USER_ROLES

PROJECT, ZONE = "my-proj", "us-west1-a"
HEAD = f"head@{PROJECT}.iam.gserviceaccount.com"
WORKER = f"worker@{PROJECT}.iam.gserviceaccount.com"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
READ_ONLY = "https://www.googleapis.com/auth/devstorage.read_only"


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


def compute(fake: FakeComputeServer, token: str):
    return discovery.build("compute", "v1", credentials=Credentials(token=token),
                           static_discovery=True, cache_discovery=False,
                           client_options={"api_endpoint": f"http://{fake.endpoint}/compute/v1/"})


def secrets(fake: FakeComputeServer, token: str):
    return discovery.build("secretmanager", "v1", credentials=Credentials(token=token),
                           static_discovery=True, cache_discovery=False,
                           client_options={"api_endpoint": f"http://{fake.endpoint}/"})


def refusal(raised: pytest.ExceptionInfo[HttpError]) -> dict:
    return json.loads(raised.value.content)["error"]


def test_the_product_clients_present_the_users_own_credentials(fake) -> None:
    """With an emulator endpoint the product's clients use the ADC file (the session's: a
    workforce user refreshing at the fake token endpoint); the fake sees the user."""
    clients = ApiClients(build_credentials(None, fake.endpoint), fake.endpoint)
    clients.compute.call("instances.list", project=PROJECT, zone=ZONE)
    (header,) = fake.authorizations
    assert fake.identities.who(header).principal == USER


def test_a_call_without_a_minted_token_is_unauthenticated(fake) -> None:
    url = f"http://{fake.endpoint}/compute/v1/projects/{PROJECT}/zones/{ZONE}/instances"
    for headers in ({}, {"Authorization": "Bearer ya29.made-up"}):
        answer = requests.get(url, headers=headers, timeout=10)
        assert answer.status_code == 401 and answer.json()["error"]["status"] == "UNAUTHENTICATED"


def test_an_account_without_the_role_is_refused_naming_the_permission(fake) -> None:
    token = fake.vm_token(HEAD, [CLOUD_PLATFORM])
    with pytest.raises(HttpError) as raised:
        compute(fake, token).instances().insert(project=PROJECT, zone=ZONE,
                                                body={"name": "x"}).execute()
    assert raised.value.resp.status == 403
    assert refusal(raised)["message"] == (
        f"Required 'compute.instances.create' permission for 'projects/{PROJECT}/zones/{ZONE}/"
        "instances/x'")
    fake.platform.grant(PROJECT, "roles/compute.admin", f"serviceAccount:{HEAD}")
    compute(fake, token).instances().insert(project=PROJECT, zone=ZONE,
                                            body={"name": "x"}).execute()


def test_running_an_instance_as_an_account_needs_act_as_on_it(fake) -> None:
    """compute.admin alone cannot attach an account (Google's reference: grant
    serviceAccountUser too); a grant on the account itself is enough."""
    fake.platform.grant(PROJECT, "roles/compute.admin", f"serviceAccount:{HEAD}")
    token = fake.vm_token(HEAD, [CLOUD_PLATFORM])
    body = {"name": "w", "serviceAccounts": [{"email": WORKER, "scopes": [READ_ONLY]}]}
    with pytest.raises(HttpError) as raised:
        compute(fake, token).instances().insert(project=PROJECT, zone=ZONE, body=body).execute()
    assert refusal(raised)["message"] == (
        f"Permission 'iam.serviceAccounts.actAs' denied on service account {WORKER} (or it may "
        "not exist).")
    fake.platform.grant_on_account(PROJECT, WORKER, "roles/iam.serviceAccountUser",
                                   f"serviceAccount:{HEAD}")
    compute(fake, token).instances().insert(project=PROJECT, zone=ZONE, body=body).execute()
    with pytest.raises(HttpError):  # the grant was on WORKER, not on every account
        compute(fake, token).instances().insert(project=PROJECT, zone=ZONE, body={
            "name": "v", "serviceAccounts": [{"email": HEAD, "scopes": []}]}).execute()


def test_a_node_reads_only_the_secret_granted_to_it_and_only_with_its_scope(fake) -> None:
    user = secrets(fake, fake.user_token())
    for name in ("ray-a-auth-token", "ray-b-auth-token"):
        user.projects().secrets().create(parent=f"projects/{PROJECT}", secretId=name,
                                         body={"replication": {"automatic": {}}}).execute()
        user.projects().secrets().addVersion(parent=f"projects/{PROJECT}/secrets/{name}",
                                             body={"payload": {"data": "dG9rZW4="}}).execute()
    fake.platform.grant_on_secret(PROJECT, "ray-a-auth-token",
                                  "roles/secretmanager.secretAccessor", f"serviceAccount:{WORKER}")
    node = secrets(fake, fake.vm_token(WORKER, [CLOUD_PLATFORM]))
    versions = node.projects().secrets().versions()
    latest = f"projects/{PROJECT}/secrets/ray-a-auth-token/versions/latest"
    assert versions.access(name=latest).execute()["payload"]["data"] == "dG9rZW4="
    other = f"projects/{PROJECT}/secrets/ray-b-auth-token/versions/latest"
    with pytest.raises(HttpError) as raised:
        versions.access(name=other).execute()
    assert refusal(raised)["status"] == "PERMISSION_DENIED"
    assert refusal(raised)["message"] == (
        f"Permission 'secretmanager.versions.access' denied on resource '{other}' (or it may "
        "not exist).")
    read_only = secrets(fake, fake.vm_token(WORKER, [READ_ONLY]))
    with pytest.raises(HttpError) as raised:
        read_only.projects().secrets().versions().access(name=latest).execute()
    assert refusal(raised)["details"][0]["reason"] == "ACCESS_TOKEN_SCOPE_INSUFFICIENT"


def test_the_compute_client_library_sees_googles_403(fake) -> None:
    """The google-cloud-compute client (Google's own, the fake's reference client; the product
    calls Compute over REST) raises Forbidden with the message."""
    from google.cloud import compute_v1

    token = fake.vm_token(WORKER, [CLOUD_PLATFORM])
    client = compute_v1.InstancesClient(transport=compute_v1.services.instances.transports
                                        .InstancesRestTransport(
                                            host=fake.endpoint, url_scheme="http",
                                            credentials=Credentials(token=token)))
    with pytest.raises(Forbidden, match="Required 'compute.instances.list' permission"):
        list(client.list(project=PROJECT, zone=ZONE))


def test_the_products_rest_calls_see_googles_403_as_that_client_does(fake) -> None:
    """The product's Compute calls (infra/workers/compute_rest.py) raise the same Forbidden,
    with the same message, as the client library above, for the same identity."""
    token = fake.vm_token(WORKER, [CLOUD_PLATFORM])
    compute = ApiClients(Credentials(token=token), fake.endpoint).compute
    with pytest.raises(Forbidden, match="Required 'compute.instances.list' permission"):
        compute.call("instances.list", project=PROJECT, zone=ZONE)


def test_every_role_the_readme_asks_of_the_user_is_in_the_table() -> None:
    assert set(USER_ROLES) <= set(ROLE_PERMISSIONS)


def test_every_route_has_a_rule_naming_a_documented_method_and_a_role_that_grants_it() -> None:
    from tests.fakes.compute.access import RULES, STORAGE_RULES
    from tests.fakes.compute.identity import discovery_scopes
    from tests.fakes.compute.server import ROUTES
    from tests.fakes.compute.storage import ROUTES as STORAGE_ROUTES

    rules = [RULES[method] for _, _, method in ROUTES]
    rules += [STORAGE_RULES[method] for *_, method in STORAGE_ROUTES]
    for rule in rules:
        assert discovery_scopes(rule.document, rule.method_id), rule.method_id
        public = rule.method_id == "cloudbilling.services.skus.list"  # no IAM (access.py)
        assert public or any(rule.permission in held for held in ROLE_PERMISSIONS.values()), \
            rule


def test_a_nodes_metadata_token_works_at_the_cloud_apis_by_its_own_accounts_grants(
        fake) -> None:
    """One token registry: what the fake metadata server (tests/support/bootstrap_stubs.py) hands a
    node is its account's token at every fake API, judged by that account's grants alone."""
    from tests.support.bootstrap_stubs import FakeGoogle

    with FakeGoogle(service_account=WORKER, scopes=(CLOUD_PLATFORM,), project=PROJECT) as node:
        answer = requests.get(f"{node.url}/computeMetadata/v1/instance/service-accounts/"
                              "default/token", headers={"Metadata-Flavor": "Google"}, timeout=5)
        token = answer.json()["access_token"]
        api = compute(fake, token)
        with pytest.raises(HttpError) as raised:
            api.instances().list(project=PROJECT, zone=ZONE).execute()
        assert refusal(raised)["message"].startswith("Required 'compute.instances.list'")
        fake.platform.grant(PROJECT, "roles/compute.viewer", f"serviceAccount:{WORKER}")
        assert api.instances().list(project=PROJECT, zone=ZONE).execute().get("items", []) == []
        # and the user's token is no key to the node's secret: the secret is granted to WORKER
        node.secrets["projects/my-proj/secrets/s/versions/1"] = b"x"
        node.grant("projects/my-proj/secrets/s", "roles/secretmanager.secretAccessor")
        url = f"{node.url}/v1/projects/my-proj/secrets/s/versions/1:access"
        users = {"Authorization": f"Bearer {fake.identities.user_token()}"}
        user = requests.get(url, headers=users, timeout=5)
        assert user.status_code == 403 and "secretmanager.versions.access" in user.text
        mine = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=5)
        assert mine.status_code == 200
