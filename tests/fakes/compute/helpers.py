"""Inputs and providers for tests that drive WorkerGroupProvider against the fake."""

from __future__ import annotations

from typing import Any

import pulumi

from infra.workers import ClusterSweeperProvider, Deadlines, RetryPolicy, WorkerGroupProvider

PROJECT, ZONE, CLUSTER, NODE_TYPE = "my-proj", "us-west1-a", "full", "ray_worker_small"


def compute_body(launch_config: str = "abc123", machine_type: str = "n1-standard-2",
                 script: str = "echo hi", version: str = "v1") -> dict[str, Any]:
    """An instances.insert body as the program builds it: Ray's labels, no name."""
    return {
        "machineType": f"zones/{ZONE}/machineTypes/{machine_type}",
        "disks": [{"boot": True, "autoDelete": True, "type": "PERSISTENT",
                   "initializeParams": {"diskSizeGb": 50, "sourceImage":
                                        "projects/deeplearning-platform-release/global/images/"
                                        "family/common-cpu"}}],
        "networkInterfaces": [{"network": "global/networks/default",
                               "accessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}],
        "metadata": {"items": [{"key": "startup-script", "value": script},
                               {"key": "ray-bootstrap-version", "value": version}]},
        "scheduling": {"preemptible": True},
        "labels": {"ray-cluster-name": CLUSTER, "ray-node-type": "unmanaged",
                   "ray-node-status": "up-to-date", "ray-node-name": f"ray-{CLUSTER}-worker",
                   "ray-user-node-type": NODE_TYPE, "ray-launch-config": launch_config},
    }


def gpu_body(count: int) -> dict[str, Any]:
    """compute_body with `count` T4 GPUs (GCE wants such a VM to terminate on maintenance)."""
    body = compute_body()
    body["scheduling"] = {"onHostMaintenance": "TERMINATE"}
    body["guestAccelerators"] = [{
        "acceleratorType": f"projects/{PROJECT}/zones/{ZONE}/acceleratorTypes/nvidia-tesla-t4",
        "acceleratorCount": count}]
    return body


def tpu_body() -> dict[str, Any]:
    return {"acceleratorType": "v4-8", "runtimeVersion": "tpu-ubuntu2204-base",
            "labels": {"ray-cluster-name": CLUSTER, "ray-node-type": "unmanaged",
                       "ray-node-status": "up-to-date", "ray-node-name": f"ray-{CLUSTER}-worker",
                       "ray-user-node-type": "tpu", "ray-launch-config": "t1"}}


def group_props(endpoint: str, count: int, **overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "project": PROJECT, "zone": ZONE, "cluster_name": CLUSTER,
        "node_type": NODE_TYPE, "name_prefix": f"ray-{CLUSTER}-worker",
        "body": compute_body(), "count": count, "cache_stopped_nodes": False,
        "credentials": None, "api_endpoint": endpoint,
    }
    props.update(overrides)
    return props


def fast_retry(max_attempts: int = 10) -> RetryPolicy:
    return RetryPolicy(initial_s=0.005, cap_s=0.05, max_attempts=max_attempts, deadline_s=10)


FAST_DEADLINES = Deadlines(compute_s=10, tpu_s=10, tpu_poll_s=0.02)


def fast_provider(max_attempts: int = 10) -> WorkerGroupProvider:
    """Millisecond backoff and short deadlines: the fake's operations take 50 ms."""
    return WorkerGroupProvider(retry=fast_retry(max_attempts), deadlines=FAST_DEADLINES)


def sweeper_props(endpoint: str, **overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "project": PROJECT, "zone": ZONE, "cluster_name": CLUSTER, "has_tpu": True,
        "credentials": None, "api_endpoint": endpoint,
    }
    props.update(overrides)
    return props


def fast_sweeper(max_attempts: int = 10, passes: int = 2) -> ClusterSweeperProvider:
    return ClusterSweeperProvider(
        retry=fast_retry(max_attempts), deadlines=FAST_DEADLINES, passes=passes)


class RegisteringMocks(pulumi.runtime.Mocks):
    """Pulumi mocks that keep every registration, to inspect how a resource was declared."""

    def __init__(self) -> None:
        self.registered: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        self.registered.append(args)
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        return {}


def install_registering_mocks() -> RegisteringMocks:
    mocks = RegisteringMocks()
    pulumi.runtime.set_mocks(mocks, preview=False)
    return mocks
