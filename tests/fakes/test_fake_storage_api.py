"""The fake Cloud Storage API answers like Cloud Storage where nodes and the program use it: its
routes are the storage v1 discovery document's, and it is driven here through
google-api-python-client built from that document (buckets made, objects uploaded and read
back as bytes, a caller refused where IAM or its token's scopes would refuse it)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
from google.oauth2.credentials import Credentials
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.discovery import discovery_document
from tests.fakes.compute.storage import ROUTES

STORAGE_DOC = discovery_document("storage.v1")
READ_ONLY = ["https://www.googleapis.com/auth/devstorage.read_only"]
NODE = "node@my-proj.iam.gserviceaccount.com"


def _documented(method_id: str) -> list[tuple[str, str]]:
    """(verb, path) forms the document gives a method: its JSON path, and its upload path."""
    resource, name = method_id.split(".")[1:]
    method = STORAGE_DOC["resources"][resource]["methods"][name]
    forms = [(method["httpMethod"], "/" + STORAGE_DOC["servicePath"] + method["path"])]
    for protocol in method.get("mediaUpload", {}).get("protocols", {}).values():
        forms.append((method["httpMethod"], protocol["path"]))
    return forms


def test_every_fake_route_is_a_documented_storage_method_and_path() -> None:
    for verb, template, method_id in ROUTES:
        assert (verb, template.rstrip("/")) in [
            (v, p.rstrip("/")) for v, p in _documented(method_id)
        ], f"{verb} {template} is not how the document writes {method_id}"


def test_objects_get_serves_bytes_for_alt_media_as_documented() -> None:
    get = STORAGE_DOC["resources"]["objects"]["methods"]["get"]
    assert get["supportsMediaDownload"] and "alt" in STORAGE_DOC["parameters"]
    assert "media" in STORAGE_DOC["parameters"]["alt"]["enum"]


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


def _client(fake: FakeComputeServer, token: str | None = None):
    return discovery.build(
        "storage", "v1", credentials=Credentials(token=token or fake.user_token()),
        static_discovery=True, cache_discovery=False,
        client_options={"api_endpoint": f"http://{fake.endpoint}/storage/v1/"},
    )


def _post(fake: FakeComputeServer, bucket: str, name: str, data: bytes,
          token: str) -> requests.Response:
    """A simple media upload to the document's upload path (the client would send it to
    https://, which the fake does not speak)."""
    method = STORAGE_DOC["resources"]["objects"]["methods"]["insert"]
    path = method["mediaUpload"]["protocols"]["simple"]["path"].replace("{bucket}", bucket)
    return requests.post(f"http://{fake.endpoint}{path}",
                         params={"uploadType": "media", "name": name}, data=data,
                         headers={"Authorization": f"Bearer {token}"}, timeout=10)


def _upload(fake: FakeComputeServer, bucket: str, name: str, data: bytes) -> dict:
    answer = _post(fake, bucket, name, data, fake.user_token())
    answer.raise_for_status()
    return answer.json()


def test_an_uploaded_object_reads_back_byte_for_byte(fake) -> None:
    storage = _client(fake)
    storage.buckets().insert(project="my-proj", body={"name": "ray-c-1"}).execute()
    data = bytes(range(256)) * 4
    stored = _upload(fake, "ray-c-1", "file-mounts/abc.tar.gz", data)
    assert set(stored) <= set(STORAGE_DOC["schemas"]["Object"]["properties"])
    assert stored["name"] == "file-mounts/abc.tar.gz" and stored["size"] == str(len(data))
    assert storage.objects().get_media(bucket="ray-c-1", object="file-mounts/abc.tar.gz") \
        .execute() == data
    assert ("storage.objects.get", "/storage/v1/b/ray-c-1/o/file-mounts%2Fabc.tar.gz") \
        in fake.storage.requests


def test_a_node_reads_a_bucket_only_once_the_bucket_grants_it(fake) -> None:
    """A node's token (its service account, the storage read-only scope) is refused with
    Cloud Storage's words until a BucketIAMMember makes it an objectViewer of the bucket."""
    storage = _client(fake)
    storage.buckets().insert(project="my-proj", body={"name": "ray-c-1"}).execute()
    _upload(fake, "ray-c-1", "x", b"data")
    node = fake.vm_token(NODE, READ_ONLY)
    with pytest.raises(HttpError) as refused:
        _client(fake, node).objects().get_media(bucket="ray-c-1", object="x").execute()
    assert refused.value.resp.status == 403
    assert json.loads(refused.value.content)["error"]["message"] == (
        f"{NODE} does not have storage.objects.get access to the Google Cloud Storage object. "
        "Permission 'storage.objects.get' denied on resource (or it may not exist).")
    policy = storage.buckets().getIamPolicy(bucket="ray-c-1").execute()
    storage.buckets().setIamPolicy(bucket="ray-c-1", body={**policy, "bindings": [
        {"role": "roles/storage.objectViewer", "members": [f"serviceAccount:{NODE}"]}]}).execute()
    assert _client(fake, node).objects().get_media(bucket="ray-c-1", object="x").execute() \
        == b"data"
    with pytest.raises(HttpError) as missing:
        _client(fake, node).objects().get_media(bucket="ray-c-1", object="y").execute()
    assert missing.value.resp.status == 404


def test_making_a_bucket_needs_storage_buckets_create_in_the_project(fake) -> None:
    node = fake.vm_token(NODE, ["https://www.googleapis.com/auth/cloud-platform"])
    with pytest.raises(HttpError) as refused:
        _client(fake, node).buckets().insert(project="my-proj", body={"name": "b"}).execute()
    assert json.loads(refused.value.content)["error"]["message"] == (
        f"{NODE} does not have storage.buckets.create access to the Google Cloud project. "
        "Permission 'storage.buckets.create' denied on resource (or it may not exist).")


def test_a_read_only_scope_reads_but_never_writes(fake) -> None:
    """devstorage.read_only is among objects.get's scopes, not objects.insert's: the write
    is refused for the token's scope before IAM is asked (the node is even an admin)."""
    storage = _client(fake)
    storage.buckets().insert(project="my-proj", body={"name": "ray-c-1"}).execute()
    fake.platform.grant("my-proj", "roles/storage.admin", f"serviceAccount:{NODE}")
    refused = _post(fake, "ray-c-1", "x", b"data", fake.vm_token(NODE, READ_ONLY))
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["status"] == "PERMISSION_DENIED"
    assert error["details"][0]["reason"] == "ACCESS_TOKEN_SCOPE_INSUFFICIENT"
    assert error["message"] == "Request had insufficient authentication scopes."


def test_a_call_without_a_known_token_is_unauthenticated(fake) -> None:
    _client(fake).buckets().insert(project="my-proj", body={"name": "ray-c-1"}).execute()
    for headers in ({}, {"Authorization": "Bearer ya29.never-minted"}):
        answer = requests.get(f"http://{fake.endpoint}/storage/v1/b/ray-c-1", headers=headers,
                              timeout=10)
        assert answer.status_code == 401
        assert answer.json()["error"]["status"] == "UNAUTHENTICATED"


def test_a_bucket_with_objects_refuses_deletion_until_they_are_deleted(fake) -> None:
    storage = _client(fake)
    storage.buckets().insert(project="my-proj", body={"name": "ray-c-1"}).execute()
    _upload(fake, "ray-c-1", "autoscaler/a.yaml", b"a: 1\n")
    with pytest.raises(HttpError) as refused:
        storage.buckets().delete(bucket="ray-c-1").execute()
    assert refused.value.resp.status == 409
    listed = storage.objects().list(bucket="ray-c-1").execute()
    assert set(listed) <= set(STORAGE_DOC["schemas"]["Objects"]["properties"])
    assert [item["name"] for item in listed["items"]] == ["autoscaler/a.yaml"]
    storage.objects().delete(bucket="ray-c-1", object="autoscaler/a.yaml").execute()
    storage.buckets().delete(bucket="ray-c-1").execute()
    assert "ray-c-1" not in fake.storage.buckets


def test_bucket_iam_policy_is_written_against_its_current_etag(fake) -> None:
    storage = _client(fake)
    storage.buckets().insert(project="my-proj", body={"name": "ray-c-1"}).execute()
    policy = storage.buckets().getIamPolicy(bucket="ray-c-1").execute()
    assert set(policy) <= set(STORAGE_DOC["schemas"]["Policy"]["properties"])
    binding = {"role": "roles/storage.objectViewer", "members": ["serviceAccount:a@p.iam"]}
    written = storage.buckets().setIamPolicy(
        bucket="ray-c-1", body={**policy, "bindings": [binding]}).execute()
    assert written["bindings"] == [binding] and written["etag"] != policy["etag"]
    with pytest.raises(HttpError) as stale:
        storage.buckets().setIamPolicy(bucket="ray-c-1", body={**policy, "bindings": []}) \
            .execute()
    assert stale.value.resp.status == 412
    assert storage.buckets().getIamPolicy(bucket="ray-c-1").execute()["bindings"] == [binding]
