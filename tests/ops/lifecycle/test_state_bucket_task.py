"""`invoke state-bucket` against the fake Cloud Storage (tests/fakes/gcs.py), reached as the
engine reaches it (STORAGE_EMULATOR_HOST): the bucket is made with versioning, uniform
bucket-level access and public access prevention; run again it is checked, and one made
without versioning is refused in one line naming what it lacks. Cloud Storage's transient
answers (429, 503) are retried, as every call of ours to Google is (infra/workers/retry.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.fakes.gcs import FakeGcs
from tests.support.killed_runs import PROJECT_ROOT
from tests.support.warm_python import run_module


@pytest.fixture
def gcs() -> Iterator[FakeGcs]:
    with FakeGcs() as fake:
        yield fake


def state_bucket(gcs: FakeGcs, name: str) -> subprocess.CompletedProcess[str]:
    return run_module(
        ["invoke", "state-bucket", "--bucket", name, "--project", "my-gcp-project",
         "--location", "us-west1"], cwd=PROJECT_ROOT,
        env={**os.environ, "STORAGE_EMULATOR_HOST": gcs.endpoint}, timeout=120)


def test_the_state_bucket_is_made_versioned_uniform_and_never_public(gcs) -> None:
    done = state_bucket(gcs, "acme-ray-state")
    assert done.returncode == 0, done.stderr
    assert gcs.state.buckets["acme-ray-state"] == {
        "versioning": {"enabled": True}, "location": "US-WEST1",
        "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True},
                             "publicAccessPrevention": "enforced"}}
    assert "PULUMI_BACKEND_URL=gs://acme-ray-state" in done.stdout
    assert "roles/storage.objectUser" in done.stdout

    again = state_bucket(gcs, "acme-ray-state")
    assert again.returncode == 0 and "there already" in again.stdout


def test_a_bucket_there_without_versioning_is_refused_in_one_line(gcs) -> None:
    gcs.make_bucket("old-state", versioning=False)
    done = state_bucket(gcs, "old-state")
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0
    assert "without object versioning" in done.stderr, done.stderr


def test_transient_answers_are_retried(gcs) -> None:
    gcs.state.fail_next = [503, 429]
    done = state_bucket(gcs, "acme-ray-state")
    assert done.returncode == 0, done.stderr
    assert gcs.state.fail_next == [] and "acme-ray-state" in gcs.state.buckets
