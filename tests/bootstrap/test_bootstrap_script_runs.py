"""The rendered startup script run for real (stub `ray`/`docker`/`getent`): head address,
docker idempotence, failure reporting, quoting, file mounts and resources, and the compressed
library decoded into a private file that does not outlive the run."""

from __future__ import annotations

import json
import shutil
import stat

from bootstrap.startup_script import LIBRARY_DELIMITER, render_startup_script
from tests.support.bootstrap_stubs import (
    HEAD_INTERNAL_IP,
    cluster,
    node_entries,
    run_script,
    stop_watchers,
)

HEAD_NAME = "ray-stubbed-head-1a2b3c4d-compute"


def _worker(tmp_path, config=None, metadata=None, env=None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = config or cluster()
    entries = node_entries(config, "worker", "worker_t", tmp_path)
    return run_script(entries.pop("startup-script"), tmp_path,
                      {**entries, **(metadata or {})}, env)


def test_worker_resolves_the_head_instance_name_to_its_internal_ip(tmp_path):
    run = _worker(tmp_path, metadata={"ray-head-address": HEAD_NAME})
    assert run.returncode == 0, run.log
    assert f"getent hosts {HEAD_NAME}" in run.calls
    assert f"ray start --address={HEAD_INTERNAL_IP}:6379" in run.calls
    assert run.status == "ready"


def test_head_address_that_is_an_ip_passes_through(tmp_path):
    run = _worker(tmp_path, metadata={"ray-head-address": "10.0.0.9"})
    assert "ray start --address=10.0.0.9:6379" in run.calls
    assert not any(call.startswith("getent") for call in run.calls)


def test_ray_head_ip_from_the_environment_wins_over_metadata(tmp_path):
    run = _worker(tmp_path, metadata={"ray-head-address": HEAD_NAME},
                  env={"RAY_HEAD_IP": "192.0.2.50"})
    assert "ray start --address=192.0.2.50:6379" in run.calls


def test_unresolvable_head_fails_in_the_head_address_stage(tmp_path):
    run = _worker(tmp_path, metadata={"ray-head-address": "no-such-head"},
                  env={"RAY_BOOTSTRAP_RESOLVE_TRIES": "2"})
    assert run.returncode == 3
    assert run.status == "failed:head-address:3"
    assert not any(call.startswith("ray start") for call in run.calls)


def test_commands_run_in_rays_order_with_ray_stop_before_start(tmp_path):
    run = _worker(tmp_path, metadata={"ray-head-address": "10.0.0.9"})
    assert [c for c in run.calls if not c.startswith(("ray-env", "getent"))] == [
        "record init-1", "record setup-common", "record setup-worker",
        "ray stop", "ray start --address=10.0.0.9:6379",
    ]


def test_start_commands_get_the_node_types_resources_like_rays_launcher(tmp_path):
    run = _worker(tmp_path, metadata={"ray-head-address": "10.0.0.9"})
    start_env = run.calls[run.calls.index("ray start --address=10.0.0.9:6379") + 1]
    resources = json.loads(start_env.split("RES=", 1)[1])
    assert resources == {"CPU": 4, "custom": 1}


def test_failing_command_stops_the_script_with_its_stage_and_exit_code(tmp_path):
    config = cluster(setup_commands=["record before", "exit 7", "record after"])
    run = _worker(tmp_path, config, metadata={"ray-head-address": "10.0.0.9"})
    assert run.returncode == 7
    assert run.status == "failed:setup:7"
    assert "stage=setup failed exit=7" in run.log
    assert "record after" not in run.calls
    assert not any(call.startswith("ray start") for call in run.calls)


def test_user_command_text_reaches_the_shell_unchanged(tmp_path):
    tricky = """record "it's" '$(echo injected)' "$RAY_HEAD_IP" \\"""
    config = cluster(setup_commands=[tricky + "\n  quoted"])
    run = _worker(tmp_path, config, metadata={"ray-head-address": "10.0.0.9"})
    assert run.returncode == 0, run.log
    assert "record it's $(echo injected) 10.0.0.9 quoted" in run.calls


def test_docker_pulls_runs_then_execs_commands_in_the_container(tmp_path):
    config = cluster(docker={"image": "rayproject/ray:2.9", "container_name": "rc",
                             "run_options": ["--ulimit nofile=65536:65536"]})
    run = _worker(tmp_path, config, metadata={"ray-head-address": "10.0.0.9"})
    assert run.returncode == 0, run.log
    docker = [c for c in run.calls if c.startswith("docker") and "inspect" not in c]
    assert docker[0] == "docker pull rayproject/ray:2.9"
    assert docker[1] == "docker rm -f rc"
    assert docker[2].startswith("docker run --rm --name rc -d -it --net=host")
    assert docker[2].endswith("--ulimit nofile=65536:65536 rayproject/ray:2.9 bash")
    # (besides the Ray auth token's install: `id -u`/`id -g` and root's chown in the container)
    execs = [c for c in docker if c.startswith("docker exec rc /bin/bash")]
    assert len(execs) == 4  # setup-common, setup-worker, ray stop, ray start
    assert "record init-1" in run.calls
    assert run.calls.index("record init-1") < run.calls.index("docker pull rayproject/ray:2.9")


def test_rerun_keeps_a_running_container_of_the_same_image(tmp_path):
    config = cluster(docker={"image": "rayproject/ray:2.9", "container_name": "rc"})
    run = _worker(tmp_path, config, metadata={"ray-head-address": "10.0.0.9"},
                  env={"STUB_CONTAINER": "true rayproject/ray:2.9"})
    assert run.returncode == 0, run.log
    assert not any(c.startswith(("docker run", "docker rm")) for c in run.calls)
    assert run.calls.index("ray stop") < run.calls.index("ray start --address=10.0.0.9:6379")


def test_container_of_another_image_is_replaced(tmp_path):
    config = cluster(docker={"image": "rayproject/ray:2.9", "container_name": "rc"})
    run = _worker(tmp_path, config, metadata={"ray-head-address": "10.0.0.9"},
                  env={"STUB_CONTAINER": "true rayproject/ray:2.8"})
    assert "docker rm -f rc" in run.calls
    assert any(c.startswith("docker run --rm --name rc") for c in run.calls)


def test_without_pull_before_run_a_present_image_is_not_pulled(tmp_path):
    config = cluster(docker={"image": "rayproject/ray:2.9", "container_name": "rc",
                             "pull_before_run": False})
    run = _worker(tmp_path, config, metadata={"ray-head-address": "10.0.0.9"},
                  env={"STUB_IMAGE_PRESENT": "1"})
    assert not any(c.startswith("docker pull") for c in run.calls)


def test_head_writes_bootstrap_config_and_private_key(tmp_path):
    config = cluster()
    script = render_startup_script(config, "head", "head_t")
    run = run_script(script, tmp_path, {
        "ray-bootstrap-config": "cluster_name: stubbed\n",
        "ray-bootstrap-ssh-key": "-----BEGIN KEY-----\n",
    }, env={"RAY_HEAD_IP": "10.0.0.2"})
    assert run.returncode == 0, run.log
    assert (run.home / "ray_bootstrap_config.yaml").read_text() == "cluster_name: stubbed\n"
    key = run.home / "ray_bootstrap_key.pem"
    assert key.read_text() == "-----BEGIN KEY-----\n"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_file_mounts_are_unpacked_before_initialization_and_setup_read_them(tmp_path):
    (tmp_path / "proj" / "pkg").mkdir(parents=True)
    (tmp_path / "proj" / "pkg" / "flag").write_text("present")
    (tmp_path / "settings.json").write_bytes(b'{"a": 1}\n\x00binary')
    config = cluster(
        file_mounts={"~/proj": "proj", "~/conf/settings.json": "settings.json"},
        initialization_commands=["record init-saw-$(cat ~/proj/pkg/flag)"],
        setup_commands=["record setup-saw-$(cat ~/proj/pkg/flag)"],
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = _worker(tmp_path, config, metadata={"ray-head-address": "10.0.0.9"},
                  env={"TMPDIR": str(scratch)})
    assert run.returncode == 0, run.log
    assert "record init-saw-present" in run.calls and "record setup-saw-present" in run.calls
    assert (run.home / "conf" / "settings.json").read_bytes() == b'{"a": 1}\n\x00binary'
    assert run.log.index("file mount ~/proj") < run.log.index("stage=initialization begin")
    assert "archive member" in run.log and not list(scratch.iterdir())  # unpacked copy gone


def test_a_missing_archive_fails_the_file_mounts_stage(tmp_path):
    (tmp_path / "data").mkdir()
    config = cluster(file_mounts={"~/data": "data"})
    entries = node_entries(config, "worker", "worker_t", tmp_path)
    for archive in (tmp_path / "bucket").rglob("*.tar.gz"):
        archive.unlink()
    run = run_script(entries.pop("startup-script"), tmp_path,
                     {**entries, "ray-head-address": "10.0.0.9"})
    assert run.returncode == 4
    assert run.status == "failed:file-mounts:4"
    assert not any(call.startswith("record init") for call in run.calls)


def _tpu_pod_config():
    return cluster(provider={"type": "gcp", "region": "us-central2",
                             "availability_zone": "us-central2-b", "project_id": "my-gcp-project"},
                   available_node_types={
        "head_t": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
        "worker_t": {"resources": {"TPU": 4}, "min_workers": 1, "node_config": {
            "acceleratorType": "v4-16", "runtimeVersion": "tpu-ubuntu2204-base"}},
    })


def test_tpu_pod_host_zero_alone_carries_the_pod_head_resource(tmp_path):
    resources = {}
    for number in ("0", "1"):
        run = _worker(tmp_path / number, _tpu_pod_config(), metadata={
            "ray-head-address": "10.0.0.9", "agent-worker-number": number})
        assert run.returncode == 0, run.log
        start_env = next(c for c in run.calls if c.startswith("ray-env") and "RES={" in c)
        resources[number] = json.loads(start_env.split("RES=", 1)[1])
    assert resources["0"] == {"TPU": 4, "TPU-v4-16-head": 1}
    assert resources["1"] == {"TPU": 4}


def test_library_is_decoded_into_a_private_file_removed_before_the_steps(tmp_path):
    """A `gzip` wrapper records the modes of the file it decodes into and of its directory;
    afterwards TMPDIR is empty, though the head's config watcher (a copy of the same script,
    decoding its own library) still runs."""
    stubs, tmpdir = tmp_path / "stubs", tmp_path / "tmpdir"
    stubs.mkdir()
    tmpdir.mkdir()
    (stubs / "gzip").write_text(
        "#!/bin/sh\n"
        'target=$(readlink "/proc/$$/fd/1")\n'
        'printf \'gzip-modes %s %s\\n\' "$(stat -c %a "$(dirname "$target")")" '
        '"$(stat -c %a "$target")" >> "$STUB_CALLS"\n'
        f'exec {shutil.which("gzip")} "$@"\n')
    (stubs / "gzip").chmod(0o755)
    script = render_startup_script(cluster(), "head", "head_t")
    run = run_script(script, tmp_path, {"ray-bootstrap-config": "max_workers: 2\n"},
                     env={"RAY_HEAD_IP": "10.0.0.2", "TMPDIR": str(tmpdir)}, keep_watcher=True)
    try:
        assert run.returncode == 0, run.log
        assert run.status == "ready"
        assert run.calls[0] == "gzip-modes 700 600"
        assert list(tmpdir.iterdir()) == []
    finally:
        stop_watchers(tmp_path)


def test_undecodable_library_fails_in_the_library_stage(tmp_path):
    """A payload cut short (as by a truncated metadata value) stops the node before any step,
    reported where `status` reads it."""
    script = render_startup_script(cluster(), "worker", "worker_t")
    start = script.index("\n", script.index(f"<< '{LIBRARY_DELIMITER}'")) + 1
    end = script.index(f"\n{LIBRARY_DELIMITER}\n", start)
    corrupt = script[:start + (end - start) // 2] + script[end:]
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    run = run_script(corrupt, tmp_path, {"ray-head-address": "10.0.0.9"},
                     env={"TMPDIR": str(tmpdir)})
    assert run.returncode == 7
    assert run.status == "failed:library:7"
    assert "stage=library failed exit=7: cannot decode it (base64 -d | gzip -dc)" in run.log
    assert run.calls == []  # no step ran
    assert list(tmpdir.iterdir()) == []


def _served(tmp_path, zone="us-west1-b", name="ray-stubbed-worker-0badcafe-compute",
            preemptible="FALSE"):
    """What GCE's metadata server answers about the instance, where local mode reads it."""
    served = {"instance/name": name, "instance/zone": f"projects/123456789/zones/{zone}",
              "instance/machine-type": "projects/123456789/machineTypes/n1-standard-2",
              "instance/scheduling/preemptible": preemptible}
    for path, value in served.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(value)


def test_ray_start_itself_gets_what_autoscaler_v2_and_rays_label_schedulers_read(tmp_path):
    """In `ray start`'s own environment (docker exec included): the node's type, zone,
    region and market, and, on a node Ray's autoscaler launched, its instance name."""
    for docker in ({}, {"image": "rayproject/ray:2.9", "container_name": "rc"}):
        where = tmp_path / ("docker" if docker else "host")
        where.mkdir()
        _served(where, preemptible="TRUE")
        run = _worker(where, cluster(docker=docker), metadata={"ray-head-address": "10.0.0.9"})
        assert run.returncode == 0, run.log
        assert run.calls[-2] == "ray start --address=10.0.0.9:6379"
        env = run.ray_env
        assert env["RAY_NODE_TYPE_NAME"] == "worker_t"
        assert (env["RAY_NODE_ZONE"], env["RAY_NODE_REGION"]) == ("us-west1-b", "us-west1")
        assert env["RAY_NODE_MARKET_TYPE"] == "spot"
        assert env["RAY_CLOUD_INSTANCE_ID"] == "ray-stubbed-worker-0badcafe-compute"
        assert env["RAY_CLOUD_INSTANCE_TYPE_NAME"] == "n1-standard-2"
        assert "RAY_enable_autoscaler_v2" not in env  # the head's alone says it


def _pinned_worker(tmp_path, version):
    _served(tmp_path)
    config = cluster(provider={"type": "gcp", "region": "us-west1",
                               "availability_zone": "us-west1-a",
                               "project_id": "my-gcp-project", "autoscaler_version": version})
    return _worker(tmp_path, config, metadata={"ray-head-address": "10.0.0.9",
                                               "ray-node-kind": "unmanaged"})


def test_a_node_pulumi_keeps_names_itself_to_autoscaler_v2_as_its_types_pinned_twin(tmp_path):
    """v2 adopts a Ray node by the type it reports: the twin the head's provider lists the
    instance as (bootstrap/head_provider/pinned.py); Ray's node-group label stays the type."""
    run = _pinned_worker(tmp_path, "v2")
    assert run.returncode == 0, run.log
    assert run.ray_env["RAY_CLOUD_INSTANCE_ID"] == "ray-stubbed-worker-0badcafe-compute"
    assert run.ray_env["RAY_NODE_TYPE_NAME"] == "worker_t.pinned"
    assert json.loads(run.ray_env["RAY_OVERRIDE_LABELS"])["ray.io/node-group"] == "worker_t"
    assert run.ray_env["RAY_NODE_MARKET_TYPE"] == "on-demand"


def test_a_node_pulumi_keeps_reports_no_instance_to_autoscaler_v1(tmp_path):
    run = _pinned_worker(tmp_path, "v1")
    assert run.returncode == 0, run.log
    assert "RAY_CLOUD_INSTANCE_ID" not in run.ray_env
    assert "RAY_OVERRIDE_LABELS" not in run.ray_env
    assert run.ray_env["RAY_NODE_TYPE_NAME"] == "worker_t"


def test_the_head_starts_the_autoscaler_the_yaml_asks_for(tmp_path):
    for version, flag in (("v1", "0"), ("v2", "1")):
        where = tmp_path / version
        where.mkdir()
        _served(where, name=HEAD_NAME)
        config = cluster(provider={"type": "gcp", "region": "us-west1",
                                   "availability_zone": "us-west1-a",
                                   "project_id": "my-gcp-project", "autoscaler_version": version})
        entries = node_entries(config, "head", "head_t", where)
        run = run_script(entries.pop("startup-script"), where, entries)
        assert run.returncode == 0, run.log
        assert run.ray_env["RAY_enable_autoscaler_v2"] == flag
        assert run.ray_env["RAY_CLOUD_INSTANCE_ID"] == HEAD_NAME
        assert run.ray_env["RAY_NODE_TYPE_NAME"] == "head_t"


def test_every_host_of_a_tpu_slice_reports_the_tpu_node_rays_provider_knows(tmp_path):
    """Ray's GCP provider names a TPU node by its full resource name; each host of the slice
    reports it (the TPU VM's metadata `instance-id` is the node's short name)."""
    for number in ("0", "1"):
        where = tmp_path / number
        where.mkdir()
        _served(where, zone="us-central2-b", name="t1v-n-0123abcd-w-" + number)
        (where / "project").mkdir()
        (where / "project" / "project-id").write_text("my-gcp-project")
        run = _worker(where, _tpu_pod_config(), metadata={
            "ray-head-address": "10.0.0.9", "agent-worker-number": number,
            "instance-id": "ray-stubbed-worker-0badcafe-tpu"})
        assert run.returncode == 0, run.log
        assert run.ray_env["RAY_CLOUD_INSTANCE_ID"] == (
            "projects/my-gcp-project/locations/us-central2-b/nodes/ray-stubbed-worker-0badcafe-tpu")
        assert "RAY_CLOUD_INSTANCE_TYPE_NAME" not in run.ray_env
