"""The stack's random secret (infra/stack_secret.py): made once by its dynamic provider, of
its own type, and a provider pickle that loads by its module and class name (every stack with
file_mounts keeps it pickled in its state)."""

from __future__ import annotations

import re

import dill
import pulumi

from infra.dynamic_types import STACK_SECRET_TYPE
from infra.stack_secret import StackSecret, _RandomSecretProvider
from tests.fakes.compute.helpers import install_registering_mocks


def test_each_create_makes_another_64_hex_secret_and_an_id_that_says_nothing_of_it():
    first = _RandomSecretProvider().create({"purpose": "p", "value": None})
    second = _RandomSecretProvider().create({"purpose": "p", "value": None})
    assert re.fullmatch(r"[0-9a-f]{64}", first.outs["value"])
    assert first.outs["value"] != second.outs["value"]
    assert first.outs["value"][:8] not in first.id
    assert first.outs["purpose"] == "p"


def test_the_pickled_provider_names_its_module_and_loads_back():
    blob = dill.dumps(_RandomSecretProvider(), recurse=True)
    assert b"infra.stack_secret" in blob and b"_RandomSecretProvider" in blob
    loaded = dill.loads(blob)
    assert re.fullmatch(r"[0-9a-f]{64}", loaded.create({"purpose": "p"}).outs["value"])


@pulumi.runtime.test
def test_it_registers_under_its_own_type():
    """(That the value is kept as ciphertext in the state, the engine test shows:
    tests/engine/test_engine_stacks.py, the file-mount secrets test.)"""
    mocks = install_registering_mocks()
    secret = StackSecret("k", "file_mounts archive name")

    def check(_: str) -> None:
        (args,) = [a for a in mocks.registered if a.name == "k"]
        assert args.typ == STACK_SECRET_TYPE
        assert args.inputs["purpose"] == "file_mounts archive name"

    return secret.value.apply(check)
