"""The head's autoscaler config (every worker's body) stays readable by its owner only on the
node, whether the config is inline or fetched from the cluster's bucket, and when the config
watcher installs a new one: modes checked by running the rendered script (stubbed `ray`)."""

from __future__ import annotations

import stat

from bootstrap.startup_script import render_startup_script
from tests.support.bootstrap_stubs import cluster, run_script, stop_watchers
from tests.support.waiting import wait_for


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_heads_bootstrap_config_is_readable_by_its_owner_only(tmp_path):
    script = render_startup_script(cluster(), "head", "head_t")
    run = run_script(script, tmp_path, {"ray-bootstrap-config": "cluster_name: stubbed\n"},
                     env={"RAY_HEAD_IP": "10.0.0.2"})

    assert run.returncode == 0, run.log
    assert mode(run.home / "ray_bootstrap_config.yaml") == 0o600


def test_a_config_fetched_from_the_bucket_and_its_replacement_stay_owner_only(tmp_path):
    """The object arrives through fetch_object, then the config watcher installs the one a
    new `gs://` reference names: both end 0600, whatever the umask the node runs with."""
    bucket = tmp_path / "bucket" / "autoscaler"
    bucket.mkdir(parents=True)
    (bucket / "v1.yaml").write_text("cluster_name: first\n")
    (bucket / "v2.yaml").write_text("cluster_name: second\n")
    for stored in bucket.iterdir():
        stored.chmod(0o644)
    script = "umask 022\n" + render_startup_script(cluster(), "head", "head_t")
    try:
        run = run_script(script, tmp_path,
                         {"ray-bootstrap-config": "gs://ray-c-bucket/autoscaler/v1.yaml\n"},
                         env={"RAY_HEAD_IP": "10.0.0.2", "RAY_BOOTSTRAP_WATCH_INTERVAL": "0.2"},
                         keep_watcher=True)
        assert run.returncode == 0, run.log
        config_file = run.home / "ray_bootstrap_config.yaml"
        assert config_file.read_text() == "cluster_name: first\n"
        assert mode(config_file) == 0o600

        (tmp_path / "metadata" / "ray-bootstrap-config").write_text(
            "gs://ray-c-bucket/autoscaler/v2.yaml\n")
        wait_for(lambda: config_file.read_text() == "cluster_name: second\n",
                 "the watcher installs the new config")
        assert mode(config_file) == 0o600
    finally:
        stop_watchers(tmp_path)


def test_in_a_container_whose_user_is_not_root_the_bootstrap_files_are_that_users_and_0600(
        tmp_path):
    """Ray's images run as `ray` (uid 1000): `docker cp` leaves root the owner, so the copies
    of the config and the key are chowned to the user `docker exec` runs as (its `id -u` and
    `id -g`, as Ray's launcher finds it) before they are renamed into place, 0600."""
    container = tmp_path / "container"
    (container / "root").mkdir(parents=True)
    config = cluster(docker={"image": "rayproject/ray:2.9", "container_name": "rc"})
    script = render_startup_script(config, "head", "head_t")
    run = run_script(script, tmp_path, {"ray-bootstrap-config": "cluster_name: stubbed\n",
                                        "ray-bootstrap-ssh-key": "-----BEGIN KEY-----\n"},
                     env={"RAY_HEAD_IP": "10.0.0.2", "STUB_CONTAINER_ROOT": str(container),
                          "STUB_CONTAINER_UID": "1000", "STUB_CONTAINER_GID": "100"})

    assert run.returncode == 0, run.log
    for name in ("ray_bootstrap_config.yaml", "ray_bootstrap_key.pem"):
        inside = f"/root/{name}"
        copied = f"docker cp {run.home}/{name} rc:{inside}.tmp"
        chown = f"docker exec -u 0 rc chown 1000:100 {inside}.tmp"
        moved = f"docker exec -u 0 rc mv -f {inside}.tmp {inside}"
        assert run.calls.index(copied) < run.calls.index(chown) < run.calls.index(moved)
        assert mode(container / "root" / name) == 0o600
        assert (container / "root" / name).read_bytes() == (run.home / name).read_bytes()
    assert not list((container / "root").glob("*.tmp"))


def test_a_container_user_that_is_no_number_fails_the_copy_instead_of_a_chown_to_it(tmp_path):
    container = tmp_path / "container"
    (container / "root").mkdir(parents=True)
    config = cluster(docker={"image": "rayproject/ray:2.9", "container_name": "rc"})
    script = render_startup_script(config, "head", "head_t")
    run = run_script(script, tmp_path, {"ray-bootstrap-config": "cluster_name: stubbed\n"},
                     env={"RAY_HEAD_IP": "10.0.0.2", "STUB_CONTAINER_ROOT": str(container),
                          "STUB_CONTAINER_UID": "1000; rm -rf /"})

    assert run.returncode != 0
    assert run.status.startswith("failed:docker-run:")
    assert "no user id" in run.log
    assert not [c for c in run.calls if " chown " in c]
