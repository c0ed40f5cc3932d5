"""A worker type's new startup script reaches the running workers in place (issue 13): the
WorkerGroup provider calls setMetadata (and setLabels) on every node of the group, running or
stopped, in whichever zone, through Compute's REST API against the fake;
the node watcher on each node (bootstrap/node_reapply.sh) then re-applies it. A machine change
still replaces the group, and groups created before this (their id hashed over the whole body,
metadata included) are still found, updated and deleted."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bootstrap.node_metadata import VERSION_KEY, node_metadata
from infra.workers import WorkerGroupError
from infra.workers.clients import ApiClients, build_credentials
from infra.workers.naming import GROUP_LABEL, IDENTITY_KEYS
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import (
    CLUSTER,
    PROJECT,
    ZONE,
    compute_body,
    fast_provider,
    group_props,
)
from tests.support.bootstrap_stubs import (
    FakeGoogle,
    cluster,
    gce_env,
    grant_head_reader,
    granted_node,
    stop_watchers,
)

ZONES = ["us-west1-a", "us-west1-b"]
V2 = compute_body(script="echo v2", version="v2", launch_config="v2hash")


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        server.cloud.catalogue.zones["us-west1"] = list(ZONES)
        yield server


def seen_through_the_api(fake: FakeComputeServer) -> dict[str, Any]:
    """name -> the instance as Compute's instances.get returns it (its JSON), in every zone."""
    clients = ApiClients(build_credentials(None, fake.endpoint), fake.endpoint)
    found = {}
    for zone in ZONES:
        for name in fake.instances(PROJECT, zone, **{"ray-cluster-name": CLUSTER}):
            found[name] = clients.compute.call("instances.get", project=PROJECT, zone=zone,
                                               instance=name)
    return found


def items(instance: Any) -> dict[str, str]:
    return {item["key"]: item["value"] for item in instance["metadata"].get("items") or []}


def test_a_new_script_reaches_every_worker_in_place_stopped_and_other_zones_too(fake):
    fake.faults.zone_capacity[ZONE] = 2  # the third worker fails over to us-west1-b
    provider = fast_provider()
    created = provider.create(group_props(fake.endpoint, 3, cache_stopped_nodes=True)).outs
    outs = provider.update("id", created, group_props(fake.endpoint, 2, cache_stopped_nodes=True)
                           ).outs  # one is stopped, kept for later
    before = seen_through_the_api(fake)
    assert {i["zone"].rsplit("/", 1)[-1] for i in before.values()} == set(ZONES)
    calls = dict(fake.cloud.calls)

    updated = provider.update(
        "id", outs, group_props(fake.endpoint, 2, cache_stopped_nodes=True, body=V2)).outs

    after = seen_through_the_api(fake)
    assert {n: i["id"] for n, i in after.items()} == {n: i["id"] for n, i in before.items()}
    assert len(after) == 3 and len(updated["stopped_instance_names"]) == 1
    for instance in after.values():
        assert items(instance) == {"startup-script": "echo v2", "ray-bootstrap-version": "v2"}
        assert instance["labels"]["ray-launch-config"] == "v2hash"
        assert instance["labels"][GROUP_LABEL] == created["group_id"]
    for method in ("insert", "bulkInsert", "delete", "stop", "start"):
        assert fake.cloud.calls[method] == calls.get(method, 0), method
    assert fake.cloud.calls["setMetadata"] == 3


def test_an_unchanged_body_writes_nothing(fake):
    provider = fast_provider()
    outs = provider.create(group_props(fake.endpoint, 2)).outs

    provider.update("id", outs, group_props(fake.endpoint, 3))

    assert fake.cloud.calls["setMetadata"] == fake.cloud.calls["setLabels"] == 0


def test_a_stale_fingerprint_is_read_again_and_what_others_added_stays(fake):
    provider = fast_provider()
    outs = provider.create(group_props(fake.endpoint, 2)).outs
    # Between our list and our write, someone adds an SSH key to each node.
    fake.faults.metadata_race = {"ssh-keys": "alice:ssh-ed25519 AAAA alice"}

    provider.update("id", outs, group_props(fake.endpoint, 2, body=V2))

    assert fake.cloud.calls["setMetadata"] == 4  # each node: 412 once, then accepted
    for instance in seen_through_the_api(fake).values():
        assert items(instance) == {"startup-script": "echo v2", "ray-bootstrap-version": "v2",
                                   "ssh-keys": "alice:ssh-ed25519 AAAA alice"}


def test_a_node_whose_metadata_keeps_changing_is_named_in_one_error(fake):
    provider = fast_provider()
    outs = provider.create(group_props(fake.endpoint, 1)).outs
    fake.faults.fail_next(*[412] * 5, methods={"setMetadata"})

    with pytest.raises(WorkerGroupError) as caught:
        provider.update("id", outs, group_props(fake.endpoint, 1, body=V2))

    (name,) = outs["instance_names"]
    assert f"{name} was changed by another writer 5 times in a row" in str(caught.value)
    assert "echo v2" not in str(caught.value)  # no metadata value in the message


def test_entries_the_new_body_dropped_are_removed(fake):
    provider = fast_provider()
    old = compute_body()
    old["metadata"]["items"].append({"key": "ray-file-mount-0", "value": "secret"})
    old["labels"]["team"] = "a"
    outs = provider.create(group_props(fake.endpoint, 1, body=old)).outs

    provider.update("id", outs, group_props(fake.endpoint, 1, body=V2))

    (instance,) = seen_through_the_api(fake).values()
    assert "ray-file-mount-0" not in items(instance)
    assert "team" not in instance["labels"]


def test_scale_up_after_a_script_change_creates_workers_with_the_new_script(fake):
    provider = fast_provider()
    outs = provider.create(group_props(fake.endpoint, 1)).outs

    grown = provider.update("id", outs, group_props(fake.endpoint, 3, body=V2)).outs

    after = seen_through_the_api(fake)
    assert set(after) == set(grown["instance_names"]) and len(after) == 3
    assert fake.cloud.calls["setMetadata"] == 1  # only the worker that was already there
    assert {items(i)["ray-bootstrap-version"] for i in after.values()} == {"v2"}


def test_a_machine_change_still_makes_new_workers_and_deleting_the_old_group_keeps_them(fake):
    provider = fast_provider()
    old = provider.create(group_props(fake.endpoint, 2)).outs
    bigger = group_props(fake.endpoint, 2, body=compute_body(machine_type="n2-standard-4"))
    assert provider.diff("id", old, bigger).replaces == ["body"]

    new = provider.create(bigger).outs  # Pulumi's replacement: new group first, then delete
    provider.delete("id", old)

    assert new["group_id"] != old["group_id"]
    assert set(seen_through_the_api(fake)) == set(new["instance_names"])
    assert not set(new["instance_names"]) & set(old["instance_names"])


def previous_group_id(props: dict[str, Any]) -> str:
    """The id the code before issue 13 gave a group: a hash over every identity input,
    the whole body (metadata and labels) included."""
    identity = {key: props.get(key) for key in IDENTITY_KEYS}
    return "g" + hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def test_a_group_created_by_the_previous_code_is_found_updated_scaled_and_deleted(fake):
    provider = fast_provider()
    props = group_props(fake.endpoint, 2)
    legacy = provider.create({**props, "group_id": previous_group_id(props)}).outs
    assert legacy["group_id"] == previous_group_id(props)  # what such a stack's state holds

    updated = provider.update("id", legacy, group_props(fake.endpoint, 3, body=V2)).outs
    refreshed = provider.read("id", updated).outs

    assert set(legacy["instance_names"]) < set(updated["instance_names"])
    assert refreshed["count"] == 3 and updated["group_id"] == legacy["group_id"]
    after = seen_through_the_api(fake)
    assert {i["labels"][GROUP_LABEL] for i in after.values()} == {legacy["group_id"]}
    assert {items(i)["ray-bootstrap-version"] for i in after.values()} == {"v2"}
    provider.delete("id", refreshed)
    assert seen_through_the_api(fake) == {}


# ---- end to end: the node watcher of a worker the provider created picks up its setMetadata

HEAD_NAME = "ray-stubbed-head-1a2b3c4d-compute"
WAIT_SECONDS = 30  # an upper bound for a slow machine, not a speed requirement


def worker_body(**overrides: Any) -> dict[str, Any]:
    """The group's body carrying a real rendered worker script (bootstrap_stubs' cluster)."""
    entries = node_metadata(cluster(auth={"ssh_user": "root"}, **overrides), "worker", "worker_t")
    body = compute_body()
    body["metadata"] = {"items": [{"key": k, "value": v} for k, v in
                                  {**entries, "ray-head-address": HEAD_NAME}.items()]}
    return body


def serve_as_metadata_server(instance: Any, google: FakeGoogle) -> None:
    """What GCE's metadata server does for the node: serve its instance's metadata as
    setMetadata left it (the version the watcher follows last, after the script it names)."""
    current = items(instance)
    for key in sorted(current, key=lambda k: k == VERSION_KEY):
        if google.attributes.get(key) != current[key]:
            google.set_attribute(key, current[key])


def test_the_node_watcher_of_a_running_worker_applies_the_script_set_by_set_metadata(
    fake, tmp_path
):
    provider = fast_provider()
    outs = provider.create(group_props(fake.endpoint, 1, body=worker_body())).outs
    (name,) = outs["instance_names"]
    head = {"ray-bootstrap/status": "ready", "ray-bootstrap/ray-started": "aaaa t0 1"}
    with granted_node(guest_attributes={HEAD_NAME: head}) as google:
        grant_head_reader(google, HEAD_NAME)
        serve_as_metadata_server(seen_through_the_api(fake)[name], google)
        script = tmp_path / "startup-script"
        script.write_text(google.attributes["startup-script"])
        env = gce_env(tmp_path, google, HEAD_NAME)
        calls, applied = tmp_path / "calls", tmp_path / "guest-attributes/ray-bootstrap/version"
        try:
            boot = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True,
                                  timeout=60)
            assert boot.returncode == 0, (tmp_path / "bootstrap.log").read_text()
            before = len(calls.read_text().splitlines())

            v2 = worker_body(worker_setup_commands=["record setup-worker-v2"])
            provider.update("id", outs, group_props(fake.endpoint, 1, body=v2))
            serve_as_metadata_server(seen_through_the_api(fake)[name], google)

            version = items(seen_through_the_api(fake)[name])[VERSION_KEY]
            deadline = time.monotonic() + WAIT_SECONDS
            while not (applied.exists() and applied.read_text() == version):
                assert time.monotonic() < deadline, (tmp_path / "bootstrap.log").read_text()
                time.sleep(0.05)
        finally:
            stop_watchers(tmp_path)
    rerun = [c for c in calls.read_text().splitlines()[before:]
             if not c.startswith(("ray-env", "getent"))]
    assert rerun == ["record setup-common", "record setup-worker-v2", "ray stop",
                     "ray start --address=10.128.0.7:6379"]
