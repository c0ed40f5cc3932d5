"""Files keep their secrecy on the node, and the public script reveals nothing of a secret
file's content: modes checked by running the rendered script (stubbed `ray`), the version
hash checked against an offline guess."""

from __future__ import annotations

import json
import stat

import pytest
from bootstrap_stubs import cluster, run_script

from bootstrap import node_metadata, render_startup_script
from bootstrap.node_metadata import VERSION_KEY, script_versions
from ops.plan_engine import run_program
from tests.program_runs import stack_yaml


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("name", "local", "inline", "expected"),
    [
        ("settings.json", 0o600, False, 0o600),
        ("run.sh", 0o755, False, 0o644),
        ("group.txt", 0o640, False, 0o640),
        ("setuid.bin", 0o4777, False, 0o644),
        ("service.pem", 0o644, True, 0o600),
    ],
)
def test_a_metadata_file_mount_keeps_its_mode_never_wider_than_0644(
    tmp_path, name, local, inline, expected
):
    source = tmp_path / "src" / name
    source.parent.mkdir()
    source.write_text("-----BEGIN PRIVATE KEY-----\n" if inline else "data\n")
    source.chmod(local)
    config = cluster(file_mounts={f"~/mounts/{name}": str(source)},
                     provider={"type": "gcp", "region": "us-west1",
                               "availability_zone": "us-west1-a",
                               "project_id": "my-gcp-project",
                               "inline_secret_file_mounts": inline})
    entries = node_metadata(config, "worker", "worker_t", digest_key="k")
    assert "ray-file-mount-0" in entries, "the file travels in metadata"

    (tmp_path / "node").mkdir()
    run = run_script(entries.pop("startup-script"), tmp_path / "node",
                     {**entries, "ray-head-address": "10.0.0.9"})

    assert run.returncode == 0, run.log
    written = run.home / "mounts" / name
    assert written.read_bytes() == source.read_bytes()
    assert mode(written) == expected


def test_the_heads_bootstrap_config_is_readable_by_its_owner_only(tmp_path):
    script = render_startup_script(cluster(), "head", "head_t")
    run = run_script(script, tmp_path, {"ray-bootstrap-config": "cluster_name: stubbed\n"},
                     env={"RAY_HEAD_IP": "10.0.0.2"})

    assert run.returncode == 0, run.log
    assert mode(run.home / "ray_bootstrap_config.yaml") == 0o600


def pin_cluster(tmp_path, pin: str):
    source = tmp_path / pin / ".pin"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(pin)
    return cluster(file_mounts={"~/.pin": str(source)})


def test_the_version_of_a_secret_mount_depends_on_the_stack_key_not_on_the_content_alone(
    tmp_path,
):
    """Anyone may read the startup script and `ray-bootstrap-version`; without the stack's
    key they match no guess of the content, and with it a content change still re-applies."""
    real = pin_cluster(tmp_path, "4821")
    key = "f" * 64

    def version(config, digest_key):
        return script_versions(config, digest_key=digest_key)["worker_t"]

    published = version(real, key)
    guesses = {version(pin_cluster(tmp_path, guess), guessed_key)
               for guess in ("4821", "0000", "1234") for guessed_key in (None, "")}
    assert published not in guesses
    assert version(real, "e" * 64) != published, "another stack's key, another version"
    assert version(pin_cluster(tmp_path, "4822"), key) != published, "content change re-applies"
    script = node_metadata(real, "worker", "worker_t", digest_key=key)["startup-script"]
    assert "4821" not in script and "NDgyMQ" not in script


def test_the_offline_plan_shows_the_same_version_whatever_the_secret_content(tmp_path):
    """`invoke diff` posts the plan in a PR: it holds no key, so it leaves the content out."""
    versions = []
    for pin in ("1111", "2222"):
        source = tmp_path / pin
        source.write_text(pin)
        raw = stack_yaml("full")
        raw["file_mounts"] = {"~/.pin": str(source)}
        run = run_program({"ray-gcp:clusterConfig": json.dumps(raw)}, stack="pin")
        (head,) = run.of_type("gcp:compute/instance:Instance")
        versions.append((head.inputs["metadata"][VERSION_KEY], run.outputs["script_versions"]))
        assert head.inputs["metadata"]["ray-file-mount-0"] == "[secret]"
    assert versions[0] == versions[1]
