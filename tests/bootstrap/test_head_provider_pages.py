"""The head's provider sees every node of a zone past one list page (Compute answers at most 500
instances a page; Ray's own `list_instances` reads one page), and waits out Compute's rate
quotas instead of failing the autoscaler's update: Ray's discovery clients against the fake
(tests/fakes/compute/google_profile.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.google_profile import LISTS, CloudProfile
from tests.support.ray_cooperation import (
    as_the_programs_head,
    ray_apis_fixture,  # noqa: F401 (`ray_apis_at_fake`)
)

PROJECT, ZONE, CLUSTER = "my-proj", "us-west1-a", "c"
PROVIDER = {"project_id": PROJECT, "availability_zone": ZONE}
WINDOW_S = 4.0


def _workers(fake: FakeComputeServer, count: int) -> None:
    for index in range(count):
        fake.cloud.add_foreign_instance(PROJECT, ZONE, f"ray-{CLUSTER}-worker-{index:04d}", {
            "ray-cluster-name": CLUSTER, "ray-node-kind": "worker",
            "ray-user-node-type": "cpu"})


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[FakeComputeServer]:
    profile = getattr(request, "param", None)
    with FakeComputeServer(Faults(operation_s=0.0), profile=profile) as server:
        as_the_programs_head(server, PROJECT)
        yield server


def _provider():  # type: ignore[no-untyped-def]
    from bootstrap.head_provider.provider import HeadNodeProvider

    return HeadNodeProvider(PROVIDER, CLUSTER)


def test_every_node_past_a_list_page_is_seen(fake, ray_apis_at_fake):
    _workers(fake, 620)
    assert len(_provider().non_terminated_nodes({})) == 620
    assert fake.cloud.calls["list"] >= 2


@pytest.mark.parametrize("fake", [CloudProfile(quotas={LISTS: 1}, window_s=WINDOW_S)],
                         indirect=True)
def test_a_rate_quota_refusal_is_waited_out(fake, ray_apis_at_fake):
    _workers(fake, 520)  # two pages: two list calls, one a window
    provider = _provider()
    time.sleep(WINDOW_S - time.time() % WINDOW_S + 0.05)
    began = time.monotonic()
    assert len(provider.non_terminated_nodes({})) == 520
    assert fake.limiter.refused == {LISTS: 1}
    assert time.monotonic() - began >= WINDOW_S - 1
