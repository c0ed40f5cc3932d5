"""The guardrails (policy/rules.py) on the resources the program really registers for the
shipped stacks: the offline plan's resources, WorkerGroup and TPU slice bodies included, as
Pulumi's analyzer would hand them to the pack (type token, logical name, inputs)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs, StackValidationArgs
from pulumi_policy.policy import PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

from ops.review.plan import plan_stack
from policy.__main__ import policy_of
from policy.rules import BY_NAME, Violation, evaluate
from tests.support.plan_repos import as_printed

STACKS = ("full", "tpu", "tpu-queued")
EVERY_RULE_OFF = {name: "disabled" for name in BY_NAME}
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


@pytest.fixture(scope="module")
def plans() -> dict[str, dict[str, Any]]:
    """The shipped stacks' plans, made in this process by `plan_stack` (what `invoke plan`'s
    interpreter runs), read back from their JSON documents."""
    return {stack: as_printed(plan_stack(stack)) for stack in STACKS}


def resources(plan: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(r["type"], r["name"], copy.deepcopy(r["inputs"])) for r in plan["resources"]]


def only(rule: str, **params: Any) -> dict[str, Any]:
    """A pack config with one rule on, as mandatory, with these parameters."""
    return {**EVERY_RULE_OFF, rule: {"enforcementLevel": "mandatory", **params}}


def flagged(found: list[Violation]) -> set[str]:
    return {v.resource for v in found}


def by_kind(plan: dict[str, Any], kind: str) -> list[str]:
    return [r["name"] for r in plan["resources"] if r["kind"] == kind]


def edit_body(items: list[tuple[str, str, dict[str, Any]]], name: str,
              change: Callable[[dict[str, Any]], None]) -> None:
    change(next(inputs for _, n, inputs in items if n == name)["body"])


def test_ssh_open_to_the_internet_is_flagged_and_the_tag_scoped_internal_rule_is_not(plans):
    found = evaluate(resources(plans["full"]), only("no-open-admin-ports"))
    assert [(v.resource, v.message.split(":")[0]) for v in found] == [
        ("ray-full-ssh", "port(s) 22 open to 0.0.0.0/0")]


def test_external_ips_are_flagged_on_head_pinned_workers_and_tpu_slices_when_private(plans):
    full = resources(plans["full"])
    (group,) = by_kind(plans["full"], "WorkerGroup")
    assert flagged(evaluate(full, only("private-nodes", required=True))) == {
        *by_kind(plans["full"], "Instance"), group}
    tpu = evaluate(resources(plans["tpu"]), only("private-nodes", required=True))
    assert set(by_kind(plans["tpu"], "V2Vm")) <= flagged(tpu)
    assert evaluate(full, only("private-nodes")) == [], "not required: nothing to judge"

    def internal_only(body: dict[str, Any]) -> None:
        for nic in body["networkInterfaces"]:
            nic.pop("accessConfigs")
    edit_body(full, group, internal_only)
    assert group not in flagged(evaluate(full, only("private-nodes", required=True)))


def test_tpu_chips_pinned_per_cluster_are_capped(plans):
    # tpu.yaml pins 7 slices of v2-8: 8 TensorCores, 4 chips each (Cloud TPU's v2 naming).
    items = resources(plans["tpu"])
    assert [v.message for v in evaluate(items, only("max-accelerators", maxTpuChips=27))] == [
        "cluster 'tputest' pins 28 TPU chips, above the cap of 27"]
    assert evaluate(items, only("max-accelerators", maxTpuChips=28)) == []


def test_gpus_in_a_pinned_worker_groups_body_count_against_the_cap(plans):
    items = resources(plans["full"])
    (group,) = by_kind(plans["full"], "WorkerGroup")
    edit_body(items, group, lambda body: body["guestAccelerators"].append(
        {"acceleratorType": "zones/us-west1-a/acceleratorTypes/nvidia-tesla-t4",
         "acceleratorCount": 2}))
    assert [v.message for v in evaluate(items, only("max-accelerators", maxGpus=1))] == [
        "cluster 'full' pins 2 GPUs, above the cap of 1"]


def test_on_demand_workers_are_flagged_where_spot_is_required(plans):
    tpu = evaluate(resources(plans["tpu"]), only("spot-workers", required=True))
    assert flagged(tpu) == set(by_kind(plans["tpu"], "V2Vm")), "the head may run on demand"
    queued = evaluate(resources(plans["tpu-queued"]), only("spot-workers", required=True))
    assert queued == [], "tpu-queued.yaml's slices ask for spot"
    full = resources(plans["full"])
    assert evaluate(full, only("spot-workers", required=True)) == [], "preemptible workers"
    (group,) = by_kind(plans["full"], "WorkerGroup")
    edit_body(full, group, lambda body: body["scheduling"].update(preemptible=False))
    assert flagged(evaluate(full, only("spot-workers", required=True))) == {group}


def test_a_spot_group_with_an_on_demand_fallback_is_flagged_where_spot_is_required(plans):
    full = resources(plans["full"])
    (group,) = by_kind(plans["full"], "WorkerGroup")
    next(inputs for _, n, inputs in full if n == group)["capacity"] = {
        "fallback": "on-demand", "return_to_spot": False}
    found = evaluate(full, only("spot-workers", required=True))
    assert [(v.resource, v.message.split(":")[0]) for v in found] == [
        (group, "spot worker that falls back to on-demand where spot is required")]


def test_a_spot_group_whose_capacity_ladder_leaves_spot_is_flagged_where_spot_is_required(
        plans):
    full = resources(plans["full"])
    (group,) = by_kind(plans["full"], "WorkerGroup")
    inputs = next(inputs for _, n, inputs in full if n == group)
    inputs["capacity"] = {"ladder": [{"market": "spot"}]}
    assert evaluate(full, only("spot-workers", required=True)) == []
    inputs["capacity"] = {"ladder": [{"market": "spot"}, {"market": "flex-start"}]}
    found = evaluate(full, only("spot-workers", required=True))
    assert [(v.resource, v.message.split(":")[0]) for v in found] == [
        (group, "spot worker that falls back to on-demand where spot is required")]


def test_machine_families_and_regions_outside_the_allow_lists_are_flagged(plans):
    full = resources(plans["full"])
    nodes = {*by_kind(plans["full"], "Instance"), *by_kind(plans["full"], "WorkerGroup")}
    assert flagged(evaluate(full, only("allowed-machines", families=["n2"]))) == nodes
    assert evaluate(full, only("allowed-machines", families=["n1"], regions=["us-west1"])) == []
    queued = evaluate(resources(plans["tpu-queued"]),
                      only("allowed-machines", families=["n2", "v5litepod"]))
    assert flagged(queued) == set(by_kind(plans["tpu-queued"], "QueuedTpuSlice"))


def test_cloud_platform_scope_is_flagged_only_where_no_secret_is_read(plans):
    """Every node of a stack with Ray's token auth reads Secret Manager (cloud-platform only):
    none is flagged; a worker body that reads no secret is, and the head only when asked."""
    tpu = resources(plans["tpu"])
    assert evaluate(tpu, only("no-cloud-platform-scope", includeHead=True)) == []
    full = resources(plans["full"])
    (group,) = by_kind(plans["full"], "WorkerGroup")
    edit_body(full, group, lambda body: body.update(metadata={"items": [
        item for item in body["metadata"]["items"]
        if item["key"] != "ray-auth-token-secret"]}))
    assert flagged(evaluate(full, only("no-cloud-platform-scope"))) == {group}


def test_missing_cost_labels_are_flagged_until_the_body_carries_them(plans):
    full = resources(plans["full"])
    (group,) = by_kind(plans["full"], "WorkerGroup")
    assert group in flagged(evaluate(full, only("cost-labels")))
    edit_body(full, group, lambda body: body["labels"].update(team="ml", **{"cost-center": "42"}))
    assert group not in flagged(evaluate(full, only("cost-labels")))
    assert evaluate(full, only("cost-labels", labels=["ray-cluster-name"])) == []


def test_hourly_price_cap_agrees_with_the_reviews_own_estimate(plans):
    """ops.review.prices prices the cluster from its YAML (disks included); the rule prices
    the registered resources (disks left out): a cap at that estimate passes, 10% under fails."""
    for stack in ("full", "tpu"):
        pinned = plans[stack]["price_per_hour"]["pinned"]
        items = resources(plans[stack])
        assert evaluate(items, only("max-hourly-price", maxUsdPerHour=pinned)) == [], stack
        (found,) = evaluate(items, only("max-hourly-price", maxUsdPerHour=pinned * 0.9))
        assert "at its pinned size, above the cap" in found.message


def test_boot_disks_without_a_kms_key_are_flagged_where_required(plans):
    full = resources(plans["full"])
    (group,) = by_kind(plans["full"], "WorkerGroup")
    nodes = {*by_kind(plans["full"], "Instance"), group}
    assert flagged(evaluate(full, only("boot-disk-cmek", required=True))) == nodes
    key = "projects/p/locations/us-west1/keyRings/r/cryptoKeys/k"
    edit_body(full, group, lambda body: body["disks"][0].update(
        diskEncryptionKey={"kmsKeyName": key}))
    assert group not in flagged(evaluate(full, only("boot-disk-cmek", required=True)))
    assert evaluate(resources(plans["tpu-queued"]), only("boot-disk-cmek", required=True))[0] \
        .resource in by_kind(plans["tpu-queued"], "Instance"), "a TPU slice has no boot disk"


def test_the_pulumi_pack_reports_what_the_offline_review_reports(plans):
    """The pack's policies, called the way pulumi_policy's analyzer calls them, report the
    same violations as `evaluate` for the same config (defaults filled in both ways), their
    inputs wrapped as the analyzer wraps them (lists and maps as pulumi-policy's proxies)."""
    config = {"private-nodes": {"required": True}, "max-accelerators": {"maxTpuChips": 8},
              "cost-labels": {"labels": ["team"]}}
    items = resources(plans["tpu"])
    proxied = [(t, name, unknown_checking_proxy(copy.deepcopy(props))) for t, name, props in items]
    offline = {(v.policy, v.resource, v.message) for v in evaluate(items, config)}
    reported = set()
    options = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
    as_policy = [PolicyResource(t, props, f"urn:{name}", name, options, None, None, [], {})
                 for t, name, props in proxied]
    names = {f"urn:{r.name}": r.name for r in as_policy}
    for rule in BY_NAME.values():
        policy = policy_of(rule)
        own = config.get(rule.name, {})
        if rule.on_resource is not None:
            for t, name, props in proxied:
                args = ResourceValidationArgs(t, props, f"urn:{name}", name, options, None, own)
                policy.validate(args, lambda message, urn, n=name, p=rule.name:
                                reported.add((p, n, message)))
        else:
            policy.validate(StackValidationArgs(as_policy, own),
                            lambda message, urn, p=rule.name:
                            reported.add((p, urn and names[urn], message)))
    cluster = {(p, m) for p, _, m in offline if p == "max-accelerators"}
    assert cluster and {(p, m) for p, _, m in reported if p == "max-accelerators"} == cluster
    assert {x for x in reported if x[0] != "max-accelerators"} == \
        {x for x in offline if x[0] != "max-accelerators"}


def test_labels_unknown_in_a_preview_stop_only_the_policies_that_read_them(plans):
    """In the engine's preview of a new stack a node's labels are unknown (the launch hash
    awaits the key pair): the rules that need no label still judge the node; one that needs
    them raises pulumi-policy's UnknownValueError (the analyzer reports it as not run)."""
    head = next((t, name, props) for t, name, props in resources(plans["full"])
                if t == "gcp:compute/instance:Instance")
    props = unknown_checking_proxy({**head[2], "labels": UNKNOWN_STRING_VALUE})
    config = {"private-nodes": {"required": True}, "allowed-machines": {"families": ["n2"]}}
    for rule in ("private-nodes", "allowed-machines"):
        assert BY_NAME[rule].on_resource(head[0], props, {**BY_NAME[rule].params,
                                                          **config[rule]}), rule
    with pytest.raises(UnknownValueError):
        BY_NAME["cost-labels"].on_resource(head[0], props, BY_NAME["cost-labels"].params)
