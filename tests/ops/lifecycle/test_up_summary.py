"""`invoke up` ends with the head's address, whether Ray is up on it (the head's own
`ray-bootstrap/status` guest attribute, from the fake Compute API, asked for a bounded time)
and the commands to type next."""

from __future__ import annotations

import io
import threading
import time

import pytest

from ops.cloud.cloud_api import API_ENDPOINT_ENV
from ops.lifecycle import up_summary
from ops.lifecycle.up_summary import print_summary, ray_state
from ops.stacks.stack import parse_outputs
from tests.fakes.compute import FakeComputeServer

PROJECT, ZONE, HEAD = "my-gcp-project", "us-west1-a", "ray-mine-head-0000"
OUTPUTS = parse_outputs("mine", {
    "cluster_name": "mine", "head_name": HEAD, "head_internal_ip": "10.0.0.2",
    "head_external_ip": "203.0.113.7", "ssh_user": "ubuntu", "ssh_private_key": "k",
    "project": PROJECT, "zone": ZONE, "script_versions": {"head": "v2"}})


@pytest.fixture
def gce(monkeypatch: pytest.MonkeyPatch):
    with FakeComputeServer() as fake:
        monkeypatch.setenv(API_ENDPOINT_ENV, fake.endpoint)
        monkeypatch.setattr(up_summary, "POLL_S", 0.1)
        yield fake


def publish(fake: FakeComputeServer, status: str, version: str = "v2") -> None:
    fake.guest_attributes[(PROJECT, ZONE, HEAD)] = {
        "ray-bootstrap/status": f"{status}\n", "ray-bootstrap/version": version}


@pytest.mark.parametrize(("status", "version", "said"), [
    ("ready", "v2", "Ray is up"),
    ("failed:ray-start:1", "v2", "Ray is NOT up: the bootstrap failed at ray-start (exit 1); "
                                 "`invoke status` shows its log"),
    ("running:setup", "v2", "Ray is not up yet (bootstrap at setup)"),
    ("ready", "v1", "Ray is not up on the new startup script yet (re-applying it)"),
    (None, "", "Ray is not up yet (the head has not reported yet)"),
])
def test_what_the_head_says_of_its_bootstrap_is_one_line(gce, status, version, said):
    if status is not None:
        publish(gce, status, version)
    assert ray_state(OUTPUTS, 0) == said


def test_the_wait_ends_as_soon_as_ray_is_up(gce):
    publish(gce, "running:ray-start")
    threading.Timer(0.5, publish, (gce, "ready")).start()
    started = time.monotonic()
    assert ray_state(OUTPUTS, 30) == "Ray is up"
    assert time.monotonic() - started < 10


def test_the_wait_is_bounded(gce):
    publish(gce, "running:setup")
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # sleeps, and counts the time it was asked to
        slept.append(seconds)
        time.sleep(seconds)

    assert ray_state(OUTPUTS, 1.0, sleep=sleep) == "Ray is not up after 1 s (bootstrap at setup)"
    assert slept and sum(slept) <= 1.0  # never past the deadline, however slow each ask is


def test_an_api_that_does_not_answer_is_said_not_raised(monkeypatch):
    monkeypatch.setenv(API_ENDPOINT_ENV, "127.0.0.1:9")  # nothing listens there
    assert ray_state(OUTPUTS, 0).startswith("could not ask whether Ray is up (")


def test_up_ends_with_the_address_the_state_and_the_next_commands(gce):
    publish(gce, "ready")
    out = io.StringIO()
    print_summary(OUTPUTS, out, wait_s=5)
    lines = out.getvalue().splitlines()
    assert lines[-2] == f"head {HEAD} at 203.0.113.7: Ray is up"
    for command in ("attach", "dashboard", "status", "down"):
        assert f"`invoke {command} -s mine`" in lines[-1]
