"""On GCE a node reads the cluster's bucket itself: the rendered startup script, run in a
sandbox with the metadata server (its token) and the Cloud Storage JSON API on 127.0.0.1,
fetches the file_mounts archive with its own token and unpacks it before its initialization
and setup commands, waits out a grant that has not reached IAM yet, and the head reads its
autoscaler config (50 node types, past GCE's 256 KB for one metadata value) from the bucket,
and again when `pulumi up` stores a new one."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import yaml

from bootstrap.autoscaler_config import autoscaler_config
from bootstrap.file_mounts import pack_file_mounts
from bootstrap.node_metadata import BOOTSTRAP_CONFIG_KEY, METADATA_VALUE_LIMIT, node_metadata
from model.identities import bucket_name
from tests.support.bootstrap_stubs import (
    CLOUD_PLATFORM,
    MOUNTS_KEY,
    OBJECT_VIEWER,
    STUB_ACCOUNT,
    FakeGoogle,
    cluster,
    gce_env,
    granted_node,
    stop_watchers,
)
from tests.support.waiting import wait_for

HEAD_NAME = "ray-stubbed-head-1a2b3c4d-compute"


def _boot(tmp_path: Path, google: FakeGoogle,
          extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    script = tmp_path / "startup-script"
    script.write_text(google.attributes["startup-script"])
    env = {**gce_env(tmp_path, google, HEAD_NAME),
           "RAY_BOOTSTRAP_FETCH_DELAY": "0.2", **(extra_env or {})}
    return subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True,
                          timeout=60)


def _mounted_cluster(tmp_path: Path, **overrides):
    (tmp_path / "src" / "proj").mkdir(parents=True)
    (tmp_path / "src" / "proj" / "flag").write_text("present")
    return cluster(auth={"ssh_user": "root"},  # root: no user is created on this machine
                   file_mounts={"~/proj": "proj"},
                   initialization_commands=["record init-saw-$(cat ~/proj/flag)"],
                   setup_commands=["record setup-saw-$(cat ~/proj/flag)"], **overrides)


def test_a_worker_fetches_and_unpacks_its_mounts_before_initialization_and_setup(tmp_path):
    config = _mounted_cluster(tmp_path)
    mounts = pack_file_mounts(config, tmp_path / "src").keyed(MOUNTS_KEY)
    entries = node_metadata(config, "worker", "worker_t", mounts)
    with granted_node(attributes={**entries, "ray-head-address": "10.0.0.9"},
                      objects={(bucket_name(config), mounts.object_name): mounts.content}
                      ) as google:
        try:
            boot = _boot(tmp_path, google)
        finally:
            stop_watchers(tmp_path)
    log = (tmp_path / "bootstrap.log").read_text()
    assert boot.returncode == 0, log
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[:2] == ["record init-saw-present", "record setup-saw-present"]
    assert (tmp_path / "proj" / "flag").read_text() == "present"
    encoded = mounts.object_name.replace("/", "%2F")
    assert [r for r in google.requests if r.startswith("/storage/")] == [
        f"/storage/v1/b/{bucket_name(config)}/o/{encoded}?alt=media"]
    assert f"Bearer {google.token}" not in boot.stdout + boot.stderr + log


def test_a_node_waits_for_its_read_grant_to_reach_iam(tmp_path):
    config = _mounted_cluster(tmp_path)
    mounts = pack_file_mounts(config, tmp_path / "src").keyed(MOUNTS_KEY)
    entries = node_metadata(config, "worker", "worker_t", mounts)
    bucket = bucket_name(config)
    # The node's account, with no grant on the bucket yet.
    with FakeGoogle(service_account=STUB_ACCOUNT, scopes=(CLOUD_PLATFORM,),
                    attributes={**entries, "ray-head-address": "10.0.0.9"},
                    objects={(bucket, mounts.object_name): mounts.content}) as google:

        def grant() -> None:
            wait_for(lambda: sum(r.startswith("/storage/") for r in google.requests) >= 2,
                     "two refused reads")
            google.grant(f"projects/_/buckets/{bucket}", OBJECT_VIEWER)

        granting = threading.Thread(target=grant)
        granting.start()
        try:
            boot = _boot(tmp_path, google)
        finally:
            granting.join()
            stop_watchers(tmp_path)
    log = (tmp_path / "bootstrap.log").read_text()
    assert boot.returncode == 0, log
    assert "Cloud Storage answered HTTP 403" in log
    assert "Permission 'storage.objects.get' denied" in log
    assert (tmp_path / "proj" / "flag").read_text() == "present"


def test_a_node_that_cannot_read_the_bucket_fails_its_file_mounts_stage_and_says_why(tmp_path):
    config = _mounted_cluster(tmp_path)
    mounts = pack_file_mounts(config, tmp_path / "src").keyed(MOUNTS_KEY)
    entries = node_metadata(config, "worker", "worker_t", mounts)
    with granted_node(attributes={**entries, "ray-head-address": "10.0.0.9"}) as google:
        google.grant(f"projects/_/buckets/{bucket_name(config)}", OBJECT_VIEWER)
        try:
            boot = _boot(tmp_path, google, {"RAY_BOOTSTRAP_FETCH_TRIES": "2"})
        finally:
            stop_watchers(tmp_path)
    log = (tmp_path / "bootstrap.log").read_text()
    assert boot.returncode == 4
    status = tmp_path / "guest-attributes" / "ray-bootstrap" / "status"
    assert status.read_text() == "failed:file-mounts:4"
    assert "roles/storage.objectViewer" in log
    assert not (tmp_path / "calls").exists() or "init-saw" not in (tmp_path / "calls").read_text()


def _types(count: int) -> dict:
    node_config = {"machineType": "n1-standard-2"}
    return {"head_t": {"resources": {"CPU": 2}, "node_config": node_config},
            **{f"worker_{i:02d}": {"resources": {"CPU": 2}, "min_workers": 0, "max_workers": 1,
                                   "node_config": node_config} for i in range(count)}}


def test_the_head_reads_a_50_type_autoscaler_config_from_the_bucket_and_follows_it(tmp_path):
    config = cluster(auth={"ssh_user": "root"}, available_node_types=_types(50),
                     max_workers=50)
    bodies = {name: {"machineType": "n1-standard-2", "metadata": {"items": [
        {"key": key, "value": value}
        for key, value in node_metadata(config, "worker", name).items()]}}
        for name in config.available_node_types}
    text = yaml.safe_dump(autoscaler_config(config, bodies))
    assert len(text) > METADATA_VALUE_LIMIT  # GCE would refuse it as one metadata value
    bucket = bucket_name(config)
    entries = node_metadata(config, "head", "head_t")
    reference = f"gs://{bucket}/autoscaler/v1.yaml"
    config_file = tmp_path / "ray_bootstrap_config.yaml"
    with granted_node(attributes={**entries, BOOTSTRAP_CONFIG_KEY: reference},
                      objects={(bucket, "autoscaler/v1.yaml"): text.encode()}) as google:
        try:
            boot = _boot(tmp_path, google, {"RAY_HEAD_IP": "10.0.0.2"})
            assert boot.returncode == 0, (tmp_path / "bootstrap.log").read_text()
            assert config_file.read_text() == text
            installed = yaml.safe_load(config_file.read_text())["available_node_types"]
            assert set(config.available_node_types) <= set(installed)  # all 51 of the YAML's
            assert len(config.available_node_types) == 51
            changed = text.replace("idle_timeout_minutes: 5", "idle_timeout_minutes: 9")
            assert changed != text
            google.objects[(bucket, "autoscaler/v2.yaml")] = changed.encode()
            google.set_attribute(BOOTSTRAP_CONFIG_KEY, f"gs://{bucket}/autoscaler/v2.yaml")
            wait_for(lambda: config_file.read_text() == changed, "the new config installed")
        finally:
            stop_watchers(tmp_path)
