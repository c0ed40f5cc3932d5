"""`invoke up/preview` progress lines say what a step does to a running node, from the
engine's own events (parsed by the Automation API, as during a real `up`)."""

from __future__ import annotations

import io
import re
import threading

from pulumi.automation.events import EngineEvent

from ops.lifecycle.events import EventPrinter
from ops.review.plan_effects import (
    CONFIG_NOTE,
    NEW_NODE_NOTE,
    NEW_WORKERS_NOTE,
    REAPPLY_NOTE,
    STOP_START_NOTE,
)
from tests.fakes.compute.helpers import compute_body

HEAD_URN = ("urn:pulumi:full::ray-gcp::ray-gcp:index:RayCluster$gcp:compute/instance:Instance"
            "::ray-full-head-1a2b3c4d-compute")


def _line(op: str, detailed_diff: dict[str, dict]) -> str:
    event = EngineEvent.from_json({"sequence": 1, "timestamp": 1, "resourcePreEvent": {
        "metadata": {"op": op, "urn": HEAD_URN, "type": "gcp:compute/instance:Instance",
                     "provider": "",
                     "diffs": sorted({re.split(r"[.\[]", k)[0] for k in detailed_diff}),
                     "detailedDiff": detailed_diff}}})
    out = io.StringIO()
    EventPrinter(out)(event)
    return out.getvalue()


def test_a_new_startup_script_is_said_to_be_reapplied_in_place():
    """Paths as pulumi-gcp's bridge writes them (a key with a dash quoted)."""
    line = _line("update", {'metadata["startup-script"]': {"diffKind": "update"}})
    assert line == (f"  update   ray-full-head-1a2b3c4d-compute (gcp:compute/instance:Instance)"
                    f"... ({REAPPLY_NOTE})\n")


def test_a_new_autoscaler_config_alone_is_said_to_be_rewritten_in_place():
    line = _line("update", {'metadata["ray-bootstrap-config"]': {"diffKind": "update"},
                            "labels.team": {"diffKind": "add"}})
    assert line.endswith(f"... ({CONFIG_NOTE})\n")


def test_a_machine_change_is_said_to_stop_and_start_the_head():
    line = _line("update", {"minCpuPlatform": {"diffKind": "update", "inputDiff": True}})
    assert line.endswith(f"... ({STOP_START_NOTE})\n")


def test_a_replaced_head_is_a_new_node():
    assert _line("replace", {"name": {"diffKind": "update-replace"}}).endswith(
        f"... ({NEW_NODE_NOTE})\n")


GROUP_TYPE = "pulumi-python:dynamic/ray-gcp:WorkerGroup"
GROUP_URN = (f"urn:pulumi:full::ray-gcp::ray-gcp:index:RayCluster${GROUP_TYPE}"
             "::full-ray_worker_small")


def _group_line(op: str, old_body: dict, new_body: dict) -> str:
    """A WorkerGroup step as the engine reports it: whole old and new inputs, no paths."""
    def state(body: dict) -> dict:
        return {"type": GROUP_TYPE, "urn": GROUP_URN,
                "inputs": {"body": body, "count": 2}, "outputs": {"group_id": "g1", "count": 2}}

    event = EngineEvent.from_json({"sequence": 1, "timestamp": 1, "resourcePreEvent": {
        "metadata": {"op": op, "urn": GROUP_URN, "type": GROUP_TYPE,
                     "provider": "", "diffs": ["body"], "old": state(old_body),
                     "new": state(new_body)}}})
    out = io.StringIO()
    EventPrinter(out)(event)
    return out.getvalue()


def test_a_worker_types_new_script_is_said_to_be_reapplied_in_place():
    line = _group_line("update", compute_body(), compute_body(script="echo v2", version="v2"))
    assert line.endswith(f"... ({REAPPLY_NOTE})\n")
    assert _group_line("update", compute_body(), compute_body(launch_config="x")).endswith(
        f"({GROUP_TYPE})...\n")  # a label: in place, nothing re-applied


def test_replaced_workers_are_new_workers():
    body = compute_body(machine_type="n2-standard-4")
    assert _group_line("replace", compute_body(), body).endswith(f"... ({NEW_WORKERS_NOTE})\n")


def _step_event(kind: str, name: str, op: str = "create") -> EngineEvent:
    urn = f"urn:pulumi:tpu::ray-gcp::ray-gcp:index:TpuSlices$gcp:tpu/v2Vm:V2Vm::{name}"
    metadata = {"op": op, "urn": urn, "type": "gcp:tpu/v2Vm:V2Vm", "provider": ""}
    return EngineEvent.from_json({"sequence": 1, "timestamp": 1, kind: {"metadata": metadata}})


def test_steps_still_running_are_named_with_how_long_longest_first():
    now = [0.0]
    printer = EventPrinter(io.StringIO(), clock=lambda: now[0])
    printer(_step_event("resourcePreEvent", "slice-0"))
    now[0] = 95.0
    printer(_step_event("resourcePreEvent", "slice-1"))
    printer(_step_event("resourcePreEvent", "unchanged", op="same"))
    now[0] = 250.0

    assert printer.still_running() == "  running  slice-0 (4m10s), slice-1 (2m35s)"
    printer(_step_event("resOutputsEvent", "slice-0"))
    assert printer.still_running() == "  running  slice-1 (2m35s)"
    printer(_step_event("resOpFailedEvent", "slice-1"))
    assert printer.still_running() is None


def test_a_long_step_prints_running_lines_while_it_waits_and_none_after():
    out = io.StringIO()
    printer = EventPrinter(out)
    with printer.ticking(interval_s=0.01):
        printer(_step_event("resourcePreEvent", "queued-slice-0"))
        for _ in range(500):  # until the ticker has spoken (each wait is 10 ms)
            if "running  queued-slice-0 (" in out.getvalue():
                break
            threading.Event().wait(0.01)
    said = out.getvalue()
    assert "  running  queued-slice-0 (0s)" in said
    printer(_step_event("resOutputsEvent", "queued-slice-0"))
    threading.Event().wait(0.05)
    assert out.getvalue().count("running") == said.count("running")  # the ticker has stopped


def _policy_event(message: str, level: str = "mandatory") -> EngineEvent:
    """A policy event as the engine sends it (events.go: colour markup, the policy's
    description then the rule's message)."""
    return EngineEvent.from_json({"sequence": 2, "timestamp": 1, "policyEvent": {
        "resourceUrn": HEAD_URN, "message": f"<{{%fg 12%}}>no external IPs\n{message}"
        "<{%reset%}>\n", "color": "raw", "policyName": "private-nodes",
        "policyPackName": "ray-gcp-guardrails", "policyPackVersion": "0.0.1",
        "policyPackVersionTag": "0.0.1", "enforcementLevel": level}})


def test_a_policy_violation_is_one_line_once_and_counts_for_the_mandatory_refusal():
    out = io.StringIO()
    printer = EventPrinter(out)
    for _ in range(2):  # the preview before an up, then the up, report it again
        printer(_policy_event("node has an external IP"))
    assert out.getvalue() == ("  policy   MANDATORY  private-nodes  "
                              "ray-full-head-1a2b3c4d-compute: node has an external IP\n")
    assert [v[0] for v in printer.violations] == ["mandatory"]


def test_a_policy_the_preview_could_not_run_is_no_violation():
    out = io.StringIO()
    printer = EventPrinter(out)
    printer.policies_only(_policy_event(
        "can't run policy 'private-nodes' from policy pack 'ray-gcp-guardrails@v0.0.1' during "
        "preview: string value at .labels can't be known during preview", level="advisory"))
    assert out.getvalue() == ("  policy   NOT RUN    private-nodes  ray-full-head-1a2b3c4d-"
                              "compute: string value at .labels can't be known during preview\n")
    assert [v[0] for v in printer.violations] == ["not run"]
