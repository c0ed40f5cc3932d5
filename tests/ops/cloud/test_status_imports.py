"""`invoke status` asks Compute over REST: every question it asks the API (the autoscaler's
workers, preemptions, what waits for capacity, the spend cap, a stopped head) is answered
without importing google-cloud-compute, whose package loads every Compute service client
(1.5-2 s of CPU, more than half of status's own time at 1,000 nodes)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import PROJECT_ROOT
from tests.fakes.compute import FakeComputeServer, Faults

PROJECT, ZONE = "my-proj", "us-west1-a"

STATUS = """
import json, os, sys
os.environ["RAY_GCP_API_ENDPOINT"] = {endpoint!r}
from ops.cloud.autoscaled import autoscaled_rows
from ops.cloud.capacity_status import capacity_lines
from ops.cloud.cloud_api import StackApi
from ops.cloud.preemptions import preemption_lines
from ops.cloud.spend_status import head_spend_lines
from ops.cloud.status import head_stopped_note
from ops.stacks.stack import parse_outputs
nodes = [{{"name": n, "node_type": "t", "kind": k, "internal_ip": "10.0.0.2",
          "status": "RUNNING"}} for n, k in (("c-head", "head"), ("c-gone", "worker"))]
api = StackApi(parse_outputs("s", {{"cluster_name": "c", "head_name": "c-head",
    "project": {project!r}, "zone": {zone!r}, "head_internal_ip": "10.0.0.2",
    "ssh_user": "u", "ssh_private_key": "k", "nodes": nodes}}))
said = [*autoscaled_rows(api)[1], *preemption_lines(api), *capacity_lines(api),
        *head_spend_lines(api), head_stopped_note(api)]
print(json.dumps([said, "google.cloud.compute_v1" in sys.modules]))
"""


def test_status_asks_every_question_without_google_cloud_compute():
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        fake.cloud.add_foreign_instance(PROJECT, ZONE, "c-head", {"ray-cluster-name": "c"})
        fake.cloud.change_instance(PROJECT, ZONE, "c-head", "stop")
        fake.cloud.settle()
        result = subprocess.run(
            [sys.executable, "-c", STATUS.format(endpoint=fake.endpoint, project=PROJECT,
                                                 zone=ZONE)],
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    said, loaded = json.loads(result.stdout.splitlines()[-1])
    assert any(line.strip().startswith("c-gone") and "gone" in line for line in said), said
    assert said[-1].startswith("the head is "), said
    assert loaded is False
