"""`invoke status` says which nodes were preempted and when, through the real google-cloud
clients against the fake: GCE's `compute.instances.preempted` operations, TPU's PREEMPTED."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from ops.cloud.cloud_api import StackApi
from ops.cloud.preemptions import CHECKING, preemption_lines
from ops.stacks.stack import parse_outputs
from tests.fakes.compute import FakeComputeServer, Faults

PROJECT, ZONE, OTHER_ZONE = "my-proj", "us-west1-a", "us-west1-b"
NOW = datetime(2026, 12, 3, 16, 2, tzinfo=timezone.utc)
PREEMPTED_AT = datetime(2026, 12, 3, 14, 2, 30, tzinfo=timezone.utc)


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


def outputs(*names: str, zones: dict[str, str] | None = None):
    nodes = [{"name": name, "node_type": "t", "kind": "head" if "head" in name else "worker",
              "internal_ip": "10.0.0.2", "status": "RUNNING",
              **({"zone": zones[name]} if zones and name in zones else {})} for name in names]
    return parse_outputs("s", {"cluster_name": "c", "head_name": names[0], "project": PROJECT,
                               "zone": ZONE, "head_internal_ip": "10.0.0.2", "ssh_user": "u",
                               "ssh_private_key": "k", "nodes": nodes})


def add_instances(fake: FakeComputeServer, zone: str, *names: str) -> None:
    for name in names:
        fake.cloud.add_foreign_instance(PROJECT, zone, name, {"ray-cluster-name": "c"})


def add_tpu(fake: FakeComputeServer, name: str) -> None:
    fake.cloud.create_node(PROJECT, ZONE, name, {"acceleratorType": "v2-8",
                                                 "runtimeVersion": "tpu-vm-base"})
    fake.cloud.settle()


def test_preempted_workers_and_tpu_slice_are_named_with_when(fake):
    add_instances(fake, ZONE, "c-head", "c-kept", "c-reclaimed", "c-fine")
    add_instances(fake, OTHER_ZONE, "c-elsewhere")
    add_tpu(fake, "c-slice-tpu")
    add_tpu(fake, "c-fine-tpu")
    fake.cloud.preempt(PROJECT, ZONE, "c-kept", keep=True, at=PREEMPTED_AT)
    fake.cloud.preempt(PROJECT, ZONE, "c-reclaimed", at=PREEMPTED_AT)
    fake.cloud.preempt(PROJECT, OTHER_ZONE, "c-elsewhere", at=PREEMPTED_AT)
    fake.cloud.preempt_node(PROJECT, ZONE, "c-slice-tpu")

    lines = preemption_lines(
        StackApi(outputs("c-head", "c-kept", "c-reclaimed", "c-fine", "c-elsewhere",
                         "c-slice-tpu", "c-fine-tpu", zones={"c-elsewhere": OTHER_ZONE}),
                 fake.endpoint), now=NOW)

    found = {line.split()[0]: " ".join(line.split()[1:]) for line in lines[1:-1]}
    assert found == {
        "c-kept": "preempted 2026-12-03 14:02 UTC (1h ago), now TERMINATED",
        "c-reclaimed": "preempted 2026-12-03 14:02 UTC (1h ago), now gone",
        "c-elsewhere": "preempted 2026-12-03 14:02 UTC (1h ago), now gone",
        "c-slice-tpu": "preempted (time unknown: the TPU API records none), now PREEMPTED",
    }
    assert lines[-1] == "  `invoke up --stack s` replaces them"


def test_a_vanished_node_without_a_preemption_record_is_called_gone(fake):
    add_instances(fake, ZONE, "c-head")

    lines = preemption_lines(StackApi(outputs("c-head", "c-deleted"), fake.endpoint),
                             now=NOW)

    assert lines[1].split(maxsplit=1) == [
        "c-deleted", "gone: not in the API any more (deleted, or reclaimed)"]


def test_a_node_made_again_after_its_preemption_is_not_called_preempted(fake):
    add_instances(fake, ZONE, "c-head", "c-worker")
    fake.cloud.preempt(PROJECT, ZONE, "c-worker", at=PREEMPTED_AT)
    add_instances(fake, ZONE, "c-worker")  # recreated since: created after the preemption
    fake.cloud.zone_instances(PROJECT, ZONE)["c-worker"]["creationTimestamp"] = \
        NOW.isoformat()

    assert preemption_lines(StackApi(outputs("c-head", "c-worker"), fake.endpoint)) == []


def test_an_unreachable_api_is_one_line():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        endpoint = f"127.0.0.1:{closed.getsockname()[1]}"

    lines = preemption_lines(StackApi(outputs("c-head"), endpoint))

    assert len(lines) == 1
    assert lines[0].startswith(f"{CHECKING} failed: the API did not answer (")


def test_status_task_shows_the_preempted_worker_between_table_and_ray_status(
        stack, fake, monkeypatch, capsys):
    from invoke import Collection, Program

    import tasks

    for name in ("ray-local-head-0000", "ray-local-worker-0001"):
        fake.cloud.add_foreign_instance("test-project", ZONE, name, {})
    fake.cloud.preempt("test-project", ZONE, "ray-local-worker-0001", at=PREEMPTED_AT)
    monkeypatch.setenv("RAY_GCP_API_ENDPOINT", fake.endpoint)
    monkeypatch.setattr("ops.cloud.status.RAY_STATUS_COMMAND", "echo '1 node(s) healthy'")

    Program(namespace=Collection.from_module(tasks)).run(["invoke", "status"], exit=False)

    out = capsys.readouterr().out
    line = "ray-local-worker-0001  preempted 2026-12-03 14:02 UTC ("
    assert out.index("NAME") < out.index(line) < out.index("1 node(s) healthy")
    section = out.split("preempted or gone")[1].split("\n\n")[0]
    assert "ray-local-head-0000" not in section  # RUNNING, as the outputs say
