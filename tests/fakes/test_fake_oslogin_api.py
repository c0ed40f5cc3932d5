"""The fake OS Login refuses what OS Login refuses (tests/fakes/oslogin.py cites each rule),
through google-api-python-client and the `oslogin` v1 discovery document it ships, with
google-auth credentials that refresh at the fake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import google.auth
import httplib2
import pytest
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

from tests.fakes.oslogin import FakeOsLogin

ME, OTHER = "me@example.com", "other@example.com"
PROJECT = "p"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGHpT1/8ZRbdVpFUAAs5OPBvOAaFkH2lLwGAkc1TqrQn"
READ_ONLY = "https://www.googleapis.com/auth/cloud-platform.read-only"


@pytest.fixture
def fake() -> Iterator[FakeOsLogin]:
    with FakeOsLogin({ME: "me_example_com", OTHER: "other_example_com"}) as server:
        yield server


def users(fake: FakeOsLogin, credentials_file: Path | None) -> Any:
    options = {"api_endpoint": f"http://{fake.endpoint}/"}
    if credentials_file is None:
        return build("oslogin", "v1", http=httplib2.Http(), static_discovery=True,
                     client_options=options).users()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(credentials_file))
        credentials, _ = google.auth.default()
    return build("oslogin", "v1", credentials=credentials, static_discovery=True,
                 client_options=options).users()


def refused(request: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(HttpError) as caught:
        request.execute()
    return caught.value.status_code, json.loads(caught.value.content)["error"]


def test_without_a_token_every_call_is_unauthenticated(fake):
    status, error = refused(users(fake, None).getLoginProfile(name=f"users/{ME}"))
    assert (status, error["status"]) == (401, "UNAUTHENTICATED")


def test_a_read_only_token_reads_the_profile_but_cannot_import(fake, tmp_path):
    api = users(fake, fake.credentials_file(ME, tmp_path, scopes=(READ_ONLY,)))
    assert api.getLoginProfile(name=f"users/{ME}", projectId=PROJECT).execute()["name"] == ME
    status, error = refused(api.importSshPublicKey(parent=f"users/{ME}", projectId=PROJECT,
                                                   body={"key": KEY}))
    assert (status, error["status"]) == (403, "PERMISSION_DENIED")
    assert error["details"][0]["reason"] == "ACCESS_TOKEN_SCOPE_INSUFFICIENT"


def test_an_account_changes_only_its_own_profile(fake, tmp_path):
    api = users(fake, fake.credentials_file(ME, tmp_path))
    status, error = refused(api.importSshPublicKey(parent=f"users/{OTHER}", projectId=PROJECT,
                                                   body={"key": KEY}))
    assert (status, error["status"]) == (403, "PERMISSION_DENIED")
    fingerprint = fake.seed(OTHER, KEY, PROJECT)
    name = f"users/{OTHER}/sshPublicKeys/{fingerprint}"
    assert refused(api.sshPublicKeys().delete(name=name))[0] == 403
    assert fingerprint in fake.profile_keys(OTHER)


def test_import_patch_and_delete_in_the_documented_shapes(fake, tmp_path):
    api = users(fake, fake.credentials_file(ME, tmp_path))
    answer = api.importSshPublicKey(parent=f"users/{ME}", projectId=PROJECT,
                                    body={"key": KEY, "expirationTimeUsec": "5"}).execute()
    profile = answer["loginProfile"]
    (entry,) = profile["sshPublicKeys"].values()
    assert entry["expirationTimeUsec"] == "5" and entry["key"] == KEY
    assert profile["posixAccounts"][0]["username"] == "me_example_com"
    assert refused(api.sshPublicKeys().patch(name=entry["name"], updateMask="key",
                                             body={"key": KEY}))[0] == 400
    api.sshPublicKeys().patch(name=entry["name"], updateMask="expirationTimeUsec",
                              body={"expirationTimeUsec": "9"}).execute()
    assert fake.profile_keys(ME)[entry["fingerprint"]]["expirationTimeUsec"] == "9"
    assert api.sshPublicKeys().delete(name=entry["name"]).execute() == {}
    assert refused(api.sshPublicKeys().delete(name=entry["name"]))[0] == 404


def test_a_key_that_is_not_one_is_invalid(fake, tmp_path):
    api = users(fake, fake.credentials_file(ME, tmp_path))
    status, error = refused(api.importSshPublicKey(parent=f"users/{ME}", projectId=PROJECT,
                                                   body={"key": "not a key"}))
    assert (status, error["status"]) == (400, "INVALID_ARGUMENT")
