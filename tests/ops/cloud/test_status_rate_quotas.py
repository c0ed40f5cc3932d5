"""`invoke status` asks the Compute API as Google answers at scale (the fake's Google-like
profile, through the real google-cloud client): the autoscaler's workers past one list page
are all listed, and a rate quota's refusal is waited out (infra/workers/retry.py), not shown
to the user as an error line."""

from __future__ import annotations

import time

from model.labels import CLUSTER_NAME, KIND_WORKER, NODE_KIND, USER_NODE_TYPE, ray_labels
from ops.cloud.autoscaled import autoscaled_rows
from ops.cloud.cloud_api import StackApi
from ops.cloud.preemptions import preemption_lines
from ops.stacks.stack import parse_outputs
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.google_profile import HEAVY_READS, LISTS, READS, CloudProfile

PROJECT, ZONE = "my-proj", "us-west1-a"
WINDOW_S = 4.0


def _outputs() -> dict[str, object]:
    return {"cluster_name": "c", "project": PROJECT, "zone": ZONE, "head_name": "ray-c-head",
            "head_internal_ip": "10.0.0.2", "ssh_user": "ubuntu", "ssh_private_key": "unused",
            "nodes": [{"name": "ray-c-head", "node_type": "head", "kind": "head",
                       "internal_ip": "10.0.0.2", "status": "RUNNING"}]}


def _autoscaled(fake: FakeComputeServer, count: int) -> None:
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "ray-c-head", ray_labels("c", "head", "head"))
    for index in range(count):
        fake.cloud.add_foreign_instance(PROJECT, ZONE, f"ray-c-worker-{index:04d}",
                                        {CLUSTER_NAME: "c", NODE_KIND: KIND_WORKER,
                                         USER_NODE_TYPE: "cpu"})


def _at_a_windows_start() -> None:
    time.sleep(WINDOW_S - time.time() % WINDOW_S + 0.05)


def test_the_autoscalers_workers_past_a_page_are_listed_and_a_list_quota_waited_out():
    # Every zone's workers (ladder rungs may be anywhere): one aggregated list, a heavy read
    profile = CloudProfile(quotas={HEAVY_READS: 1}, window_s=WINDOW_S)
    with FakeComputeServer(Faults(operation_s=0.0), profile=profile) as fake:
        _autoscaled(fake, 520)  # two pages: two aggregated lists, one a window
        api = StackApi(parse_outputs("s", _outputs()), fake.endpoint)
        _at_a_windows_start()
        nodes, errors = autoscaled_rows(api)
        assert errors == []
        assert len(nodes) == 520
        assert fake.limiter.refused == {HEAVY_READS: 1}


def test_the_preemption_check_waits_out_its_quotas():
    profile = CloudProfile(quotas={LISTS: 1, READS: 1}, window_s=WINDOW_S)
    with FakeComputeServer(Faults(operation_s=0.0), profile=profile) as fake:
        _autoscaled(fake, 0)
        api = StackApi(parse_outputs("s", _outputs()), fake.endpoint)
        _at_a_windows_start()
        assert preemption_lines(api) == []  # an instances list, then an operations list
        assert fake.limiter.refused == {LISTS: 1}
