"""The head's autoscaler config (every worker's body) stays readable by its owner only on the
node, whether the config is inline or fetched from the cluster's bucket, and when the config
watcher installs a new one: modes checked by running the rendered script (stubbed `ray`)."""

from __future__ import annotations

import stat

from bootstrap_stubs import cluster, run_script, stop_watchers
from waiting import wait_for

from bootstrap import render_startup_script


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
