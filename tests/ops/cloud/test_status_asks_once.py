"""One `invoke status` builds one set of Google API clients and reads the head instance once,
however many of its parts ask the Compute API (the autoscaled workers, the preemptions, the
spend lines, the stopped-head note). The fake numbers the TCP connections it serves; a client
keeps its connection open between calls, so one client is one connection."""

from __future__ import annotations

from bootstrap.autostop import REASON_LABEL, TIME_LABEL
from bootstrap.local_cluster import free_port
from tests.fakes.compute import FakeComputeServer
from tests.support.sshd_server import stack_outputs_for

# The fake's names for what an InstancesClient asks (tests/fakes/compute/server.py ROUTES).
INSTANCES_CALLS = {"list", "get", "getGuestAttributes"}


def test_status_of_a_stopped_head_uses_one_instances_client_and_reads_the_head_once(stack, sshd):
    outputs = stack_outputs_for(sshd, ssh_port=free_port())  # nothing listens: head is down
    stack.write_outputs(outputs)
    project, zone = outputs["project"], outputs["zone"]
    with FakeComputeServer() as fake:
        for node in outputs["nodes"]:
            fake.cloud.add_foreign_instance(project, zone, node["name"], {})
        fake.cloud.add_foreign_instance(project, zone, outputs["head_name"], {
            REASON_LABEL: "stopped", TIME_LABEL: "2026-12-03t14-15-00z"})
        with fake.cloud.lock:
            fake.cloud.zone_instances(project, zone)[outputs["head_name"]]["status"] = \
                "TERMINATED"
        result = stack.invoke("status", env={**stack.env, "RAY_GCP_API_ENDPOINT": fake.endpoint})
    assert result.returncode == 0, result.stderr
    assert "the cluster was stopped for idleness" in result.stdout  # every part was asked
    instances_calls = [served for served in fake.served if served.method in INSTANCES_CALLS]
    assert {served.method for served in instances_calls} == INSTANCES_CALLS
    assert [served.method for served in fake.served].count("get") == 1
    assert len({served.connection for served in instances_calls}) == 1, instances_calls
