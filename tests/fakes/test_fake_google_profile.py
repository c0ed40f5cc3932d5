"""The fake's Google-like profile refuses what Compute refuses (tests/fakes/compute/
google_profile.py cites each rule), and its list pages and bulkInsert rules hold in every
profile; driven through the discovery client Ray's GCP node provider uses."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from google.oauth2.credentials import Credentials
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.google_profile import (
    GOOGLE,
    HEAVY_READS,
    LISTS,
    READS,
    CloudProfile,
    RateLimiter,
    quota_group,
)

PROJECT, ZONE = "my-proj", "us-west1-a"


def _client(fake: FakeComputeServer) -> Any:
    return discovery.build(
        "compute", "v1", credentials=Credentials(token=fake.user_token()),
        static_discovery=True, cache_discovery=False,
        client_options={"api_endpoint": f"http://{fake.endpoint}/compute/v1/"})


@pytest.fixture
def served() -> Iterator[Any]:
    """A fake with the given profile and its client."""
    servers: list[FakeComputeServer] = []

    def start(profile: CloudProfile | None = None, faults: Faults | None = None) -> Any:
        fake = FakeComputeServer(faults or Faults(operation_s=0.0), profile=profile).start()
        servers.append(fake)
        return fake, _client(fake)

    yield start
    for fake in servers:
        fake.stop()


def _error(exc: HttpError) -> dict[str, Any]:
    return json.loads(exc.content)["error"]


def _insert(compute: Any, name: str) -> dict[str, Any]:
    return compute.instances().insert(project=PROJECT, zone=ZONE,
                                      body={"name": name, "labels": {"k": "v"}}).execute()


def test_methods_count_in_googles_quota_groups() -> None:
    assert quota_group("get") == READS
    assert quota_group("list") == LISTS
    assert quota_group("aggregatedList") == HEAVY_READS
    assert quota_group("wait") == quota_group("operations.get") == "operation_read_requests"
    assert quota_group("bulkInsert") == quota_group("delete") == "default"


def test_a_group_over_its_quota_answers_403_rate_limit_exceeded_and_others_go_on(served):
    fake, compute = served(CloudProfile(quotas={READS: 2}, window_s=3600))
    _insert(compute, "a")
    for _ in range(2):
        compute.instances().get(project=PROJECT, zone=ZONE, instance="a").execute()
    with pytest.raises(HttpError) as refused:
        compute.instances().get(project=PROJECT, zone=ZONE, instance="a").execute()
    assert refused.value.resp.status == 403
    assert _error(refused.value)["errors"][0]["reason"] == "rateLimitExceeded"
    assert "Read requests" in _error(refused.value)["message"]
    assert "retry-after" not in refused.value.resp  # Compute documents none
    compute.instances().list(project=PROJECT, zone=ZONE).execute()  # another group
    assert fake.limiter.refused == {READS: 1}


def test_the_quota_refills_at_the_next_synchronized_window(served):
    profile = CloudProfile(quotas={LISTS: 1}, window_s=60.0)
    fake, compute = served(profile)
    now = [120.0]  # the start of a window, on a clock the test turns (no race with the wall)
    fake.limiter = RateLimiter(profile, clock=lambda: now[0])
    compute.instances().list(project=PROJECT, zone=ZONE).execute()
    now[0] = 179.9  # later in the same window
    with pytest.raises(HttpError):
        compute.instances().list(project=PROJECT, zone=ZONE).execute()
    now[0] = 180.0  # the next window starts on a multiple of the window
    compute.instances().list(project=PROJECT, zone=ZONE).execute()


def test_the_newer_quota_answer_is_429_resource_exhausted_with_retry_after(served):
    _, compute = served(CloudProfile(quotas={LISTS: 0}, window_s=60, rate_limit_status=429,
                                     retry_after=True))
    with pytest.raises(HttpError) as refused:
        compute.instances().list(project=PROJECT, zone=ZONE).execute()
    assert refused.value.resp.status == 429
    error = _error(refused.value)
    assert error["status"] == "RESOURCE_EXHAUSTED"
    assert error["details"][0]["reason"] == "RATE_LIMIT_EXCEEDED"
    assert 1 <= int(refused.value.resp["retry-after"]) <= 60


def test_more_bulk_operations_at_once_than_allowed_are_refused(served):
    _, compute = served(CloudProfile(bulk_operations_at_once=1, operation_s=30))
    body = {"count": 2, "namePattern": "w-##", "instanceProperties": {"machineType": "n1"}}
    compute.instances().bulkInsert(project=PROJECT, zone=ZONE, body=body).execute()
    with pytest.raises(HttpError) as refused:
        compute.instances().bulkInsert(project=PROJECT, zone=ZONE, body=body).execute()
    assert refused.value.resp.status == 403
    assert _error(refused.value)["errors"][0]["reason"] == "rateLimitExceeded"


@pytest.mark.parametrize(("body", "field"), [
    ({"count": 2}, "resource"),  # no names at all
    ({"count": 2, "namePattern": "w-##-##"}, "resource.namePattern"),  # two runs of #
    ({"count": 2, "namePattern": "w-" + "#" * 19}, "resource.namePattern"),
    ({"count": 0, "namePattern": "w-##"}, "resource.count"),
    ({"count": 2, "minCount": 3, "namePattern": "w-##"}, "resource.minCount"),
])
def test_bulk_insert_refuses_what_its_request_rules_refuse(served, body, field):
    _, compute = served()
    with pytest.raises(HttpError) as refused:
        compute.instances().bulkInsert(project=PROJECT, zone=ZONE,
                                       body={**body, "instanceProperties": {}}).execute()
    assert refused.value.resp.status == 400
    assert f"'{field}'" in _error(refused.value)["message"]


def test_a_name_pattern_numbers_after_the_biggest_existing_match(served):
    fake, compute = served()
    _insert(compute, "w-07")
    compute.instances().bulkInsert(project=PROJECT, zone=ZONE, body={
        "count": 2, "namePattern": "w-##", "instanceProperties": {}}).execute()
    assert set(fake.instances(PROJECT, ZONE)) == {"w-07", "w-08", "w-09"}


def test_lists_come_in_pages_of_at_most_500(served):
    fake, compute = served()
    for zone, count in (("us-west1-a", 320), ("us-west1-b", 300)):
        compute.instances().bulkInsert(project=PROJECT, zone=zone, body={
            "count": count, "namePattern": "w-####", "instanceProperties": {}}).execute()
    first = compute.instances().list(project=PROJECT, zone=ZONE, maxResults=200).execute()
    assert len(first["items"]) == 200 and first["nextPageToken"]
    rest = compute.instances().list(project=PROJECT, zone=ZONE, maxResults=200,
                                    pageToken=first["nextPageToken"]).execute()
    assert len(rest["items"]) == 120 and not rest.get("nextPageToken")
    with pytest.raises(HttpError) as refused:
        compute.instances().list(project=PROJECT, zone=ZONE, maxResults=501).execute()
    assert refused.value.resp.status == 400
    page = compute.instances().aggregatedList(project=PROJECT).execute()
    assert sum(len(s["instances"]) for s in page["items"].values()) == 500
    assert page["nextPageToken"]
    rest = compute.instances().aggregatedList(project=PROJECT,
                                              pageToken=page["nextPageToken"]).execute()
    assert sum(len(s["instances"]) for s in rest["items"].values()) == 120


def test_operations_go_pending_running_done_and_wait_returns_at_its_limit(served):
    # 12 s an operation, PENDING for its first 6: seconds of slack for a loaded machine's
    # slow calls before each phase is looked at.
    profile = CloudProfile(operation_s=12.0, pending_share=0.5, wait_max_s=0.3)
    _, compute = served(profile, Faults())
    began = time.monotonic()
    operation = _insert(compute, "a")
    assert operation["status"] == "PENDING"  # for its first 6 s
    waited = compute.zoneOperations().wait(project=PROJECT, zone=ZONE,
                                           operation=operation["name"]).execute()
    assert waited["status"] in ("PENDING", "RUNNING")  # wait gave up at its limit
    assert time.monotonic() - began < 5.9
    time.sleep(max(0.0, 6.3 - (time.monotonic() - began)))
    polled = compute.zoneOperations().get(project=PROJECT, zone=ZONE,
                                          operation=operation["name"]).execute()
    assert polled["status"] == "RUNNING"
    while compute.zoneOperations().wait(project=PROJECT, zone=ZONE, operation=operation[
            "name"]).execute()["status"] != "DONE":
        pass
    assert time.monotonic() - began >= 11.5


def test_the_google_profile_is_googles_numbers():
    assert GOOGLE.wait_max_s == 120 and GOOGLE.window_s == 60
    assert GOOGLE.quotas["default"] == GOOGLE.quotas[READS] == 1500
    assert GOOGLE.bulk_operations_at_once == 10
