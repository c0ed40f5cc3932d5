"""The Ray auth token's dynamic resource: a random token made once at create (state keeps it),
a secret output, its own type token, and a provider that Pulumi's pickle names by module so a
later run (a fresh process: the engine's provider host) loads it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pulumi
import pytest
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import settings

from infra.dynamic_types import RAY_TOKEN_TYPE
from infra.ray_token import GeneratedRayToken, _RayTokenProvider
from tests.conftest import PROJECT_ROOT
from tests.fake_compute.helpers import install_registering_mocks

LOAD_AND_CREATE = """
import base64, json, sys
import dill
provider = dill.loads(base64.b64decode(sys.stdin.read()))
result = provider.create({"ray_auth_token": None})
print(json.dumps({"id": result.id, "outs": result.outs, "module": type(provider).__module__}))
"""


def test_each_create_makes_a_new_random_token_and_an_id_that_says_nothing_of_it():
    first, second = _RayTokenProvider().create({}), _RayTokenProvider().create({})
    tokens = [first.outs["ray_auth_token"], second.outs["ray_auth_token"]]
    assert all(re.fullmatch(r"[0-9a-f]{64}", token) for token in tokens)
    assert tokens[0] != tokens[1]
    assert first.id not in tokens[0] and tokens[0][:8] not in first.id


def test_the_pickled_provider_loads_and_creates_in_a_fresh_process():
    serialized = serialize_provider(_RayTokenProvider())
    loaded = subprocess.run([sys.executable, "-c", LOAD_AND_CREATE], input=serialized,
                            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    answer = json.loads(loaded.stdout)
    assert answer["module"] == "infra.ray_token"  # by reference: the class stays importable
    assert re.fullmatch(r"[0-9a-f]{64}", answer["outs"]["ray_auth_token"])


@pytest.fixture
def requests() -> list[Any]:
    """The RegisterResource requests pulumi's mock monitor receives."""
    install_registering_mocks()
    monitor = settings.SETTINGS.monitor
    seen: list[Any] = []
    register = monitor.RegisterResource

    def recording(request: Any) -> Any:
        seen.append(request)
        return register(request)

    monitor.RegisterResource = recording
    return seen


@pulumi.runtime.test
def test_it_has_its_own_type_and_its_token_is_a_secret_output(requests):
    token = GeneratedRayToken("token")

    def check(urn: str) -> None:
        assert urn.split("::")[2].rsplit("$", 1)[1] == RAY_TOKEN_TYPE
        (request,) = [r for r in requests if r.name == "token"]
        assert list(request.additionalSecretOutputs) == ["ray_auth_token"]

    return token.urn.apply(check)
