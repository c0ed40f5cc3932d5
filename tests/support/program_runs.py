"""Run the real program offline for a shipped stack; shared by the program tests."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import yaml

from ops.review.plan_engine import ProgramRun, run_program

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STACKS = ["full", "minimal", "gpu-docker", "tpu", "tpu-pod", "tpu-pod-topology", "private"]


def stack_yaml(stack: str) -> dict[str, Any]:
    """The stack's cluster YAML exactly as the user wrote it."""
    settings = yaml.safe_load((PROJECT_ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return yaml.safe_load((PROJECT_ROOT / settings["config"]["ray-gcp:cluster"]).read_text())


def run_inline(cluster: dict[str, Any], **extra: object) -> ProgramRun:
    """The program for a cluster YAML given inline (`ray-gcp:clusterConfig`), with more stack
    settings as keyword arguments (`workerCounts={...}`), each JSON as `pulumi config set`."""
    config = {"ray-gcp:clusterConfig": json.dumps(cluster)}
    config.update({f"ray-gcp:{k}": json.dumps(v) for k, v in extra.items()})
    return run_program(config, stack="test")


@functools.cache
def run_stack(stack: str) -> ProgramRun:
    return run_program({"ray-gcp:cluster": f"stacks/clusters/{stack}.yaml"}, stack=stack)


def head_config_text(run: ProgramRun, head: Any) -> str:
    """The autoscaler config the head reads: the bucket object its `ray-bootstrap-config`
    names (`gs://BUCKET/OBJECT`), as the plan records it (its text)."""
    reference = head.inputs["metadata"]["ray-bootstrap-config"]
    bucket, name = reference.removeprefix("gs://").split("/", 1)
    (stored,) = [r for r in run.of_type("gcp:storage/bucketObject:BucketObject")
                 if r.inputs["bucket"] == bucket and r.inputs["name"] == name]
    return stored.inputs["source"]


def stack_label(run: ProgramRun) -> str:
    """The stack identity the run's sweeper claims: every node of the run carries it."""
    (sweeper,) = [r for r in run.resources if r.name.endswith(".sweeper")]
    return str(sweeper.inputs["stack"])
