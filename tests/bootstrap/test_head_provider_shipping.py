"""The head's node provider reaches the autoscaler: the program puts the package in the head's
metadata, the head's startup script (run for real, with the stubs of bootstrap_stubs) writes it
to the home of the user Ray runs as (into the container with docker) and puts it on `ray
start`'s PYTHONPATH; Ray's own loader for `type: external` then imports, from that
environment alone, the class the head's autoscaler config names.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import bootstrap.head_provider_metadata as shipping
from bootstrap.autoscaler_config import autoscaler_config
from bootstrap.node_metadata import VERSION_KEY
from bootstrap.startup_script import script_version
from tests.support.bootstrap_stubs import cluster, node_entries, run_script, stop_watchers
from tests.support.waiting import wait_for

ARCHIVE = "ray_head_provider.zip"
DOCKER = {"image": "rayproject/ray:2.9", "container_name": "rc"}

# Run with only the PYTHONPATH `ray start` got: Ray's loader, then what the class is and where
# it came from, and whether anything of the project came with it.
LOAD = """
import json, sys
from ray.autoscaler._private.gcp.node_provider import GCPNodeProvider
from ray.autoscaler._private.providers import _get_node_provider_cls
cls = _get_node_provider_cls(json.loads(sys.argv[1]))
print(json.dumps({
    "name": cls.__name__,
    "is_rays_gcp_provider": issubclass(cls, GCPNodeProvider),
    "file": sys.modules[cls.__module__].__file__,
    "project_modules": sorted(m for m in sys.modules
                              if m.split(".")[0] in ("bootstrap", "infra", "model")),
}))
"""


def provider_section(config) -> dict:
    bodies = {name: t.node_config.body() for name, t in config.available_node_types.items()}
    return autoscaler_config(config, bodies)["provider"]


def load_as_the_monitor_would(pythonpath: str, provider: dict, tmp_path: Path) -> dict:
    """Ray's `_get_node_provider_cls` in a fresh interpreter whose only extra path is
    `pythonpath`, started outside the repository (so `bootstrap` is not on its path)."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD, json.dumps(provider)], cwd=tmp_path,
        env={"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin",
             "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"},
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_head_installs_the_provider_and_ray_start_loads_it_from_its_environment(tmp_path):
    config = cluster()
    entries = node_entries(config, "head", "head_t", tmp_path)
    run = run_script(entries.pop("startup-script"), tmp_path, entries,
                     env={"RAY_HEAD_IP": "10.0.0.2"})

    assert run.returncode == 0 and run.status == "ready", run.log
    archive = run.home / ARCHIVE
    assert archive.read_bytes() == base64.b64decode(entries["ray-head-provider"])
    assert run.ray_env["PYTHONPATH"].split(":")[0] == str(archive)
    loaded = load_as_the_monitor_would(str(archive), provider_section(config), tmp_path)
    assert loaded == {"name": "HeadNodeProvider", "is_rays_gcp_provider": True,
                      "file": f"{archive}/ray_gcp_head_provider/provider.py",
                      "project_modules": []}


def test_with_docker_the_provider_is_copied_into_the_container_and_ray_start_there_loads_it(
        tmp_path):
    container = tmp_path / "container"
    (container / "root").mkdir(parents=True)
    config = cluster(docker=DOCKER)
    entries = node_entries(config, "head", "head_t", tmp_path)
    run = run_script(entries.pop("startup-script"), tmp_path, entries,
                     env={"RAY_HEAD_IP": "10.0.0.2", "STUB_CONTAINER_ROOT": str(container),
                          "STUB_CONTAINER_UID": "1000", "STUB_CONTAINER_GID": "100"})

    assert run.returncode == 0 and run.status == "ready", run.log
    inside = container / "root" / ARCHIVE
    assert inside.read_bytes() == (run.home / ARCHIVE).read_bytes()
    assert f"docker exec -u 0 rc chown 1000:100 /root/{ARCHIVE}.tmp" in run.calls
    # `ray start` runs in the container (the stub's `docker exec` runs it here): its path is
    # the container's.
    assert run.ray_env["PYTHONPATH"].split(":")[0] == f"/root/{ARCHIVE}"
    loaded = load_as_the_monitor_would(str(inside), provider_section(config), tmp_path)
    assert loaded["name"] == "HeadNodeProvider" and loaded["is_rays_gcp_provider"]


def test_a_new_provider_reaches_the_running_container_and_restarts_ray(tmp_path, monkeypatch):
    container = tmp_path / "container"
    (container / "root").mkdir(parents=True)
    config = cluster(docker=DOCKER)
    entries = node_entries(config, "head", "head_t", tmp_path)
    env = {"RAY_HEAD_IP": "10.0.0.2", "STUB_CONTAINER_ROOT": str(container),
           "STUB_CONTAINER": f"true {DOCKER['image']}", "RAY_BOOTSTRAP_WATCH_INTERVAL": "0.1"}
    try:
        boot = run_script(entries.pop("startup-script"), tmp_path, entries, env,
                          keep_watcher=True)
        assert boot.returncode == 0, boot.log
        calls_before = len((tmp_path / "calls").read_text().splitlines())

        # The next release of the package: one more module in the zip.
        grown = io.BytesIO(shipping.archive())
        with zipfile.ZipFile(grown, "a") as packed:
            packed.writestr("ray_gcp_head_provider/newer.py", "")
        monkeypatch.setattr(shipping, "archive", lambda: grown.getvalue())
        handed = node_entries(config, "head", "head_t", tmp_path)
        metadata = tmp_path / "metadata"
        for key in ("ray-head-provider", "startup-script", VERSION_KEY):
            (metadata / f".{key}.new").write_text(handed[key])
            (metadata / f".{key}.new").rename(metadata / key)
        version = script_version(handed["startup-script"])
        applied = tmp_path / "guest-attributes" / "ray-bootstrap" / "version"
        wait_for(lambda: applied.exists() and applied.read_text() == version,
                 f"version {version} applied")
    finally:
        stop_watchers(tmp_path)

    assert (container / "root" / ARCHIVE).read_bytes() == grown.getvalue()
    calls = (tmp_path / "calls").read_text().splitlines()[calls_before:]
    assert "ray stop" in calls  # Ray restarts, and its autoscaler imports the new package
    assert calls.index("ray stop") < calls.index("ray start --head --port=6379")


def test_the_payload_is_the_packages_modules_and_the_same_bytes_every_time():
    members = zipfile.ZipFile(io.BytesIO(shipping.archive())).namelist()
    modules = sorted(p.name for p in shipping.PACKAGE_DIR.glob("*.py"))
    assert members == [f"ray_gcp_head_provider/{name}" for name in modules]
    shipping.archive.cache_clear()
    assert shipping.payload() == base64.b64encode(shipping.archive()).decode()
    assert shipping.archive() == shipping.archive.__wrapped__()


def test_a_worker_carries_no_provider(tmp_path):
    entries = node_entries(cluster(), "worker", "worker_t", tmp_path)
    assert "ray-head-provider" not in entries
    assert "install_head_provider" not in entries["startup-script"]
