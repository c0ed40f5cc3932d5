"""What the node writes stays private: the bootstrap log is its owner's (root on GCE) alone,
and file mounts land where Ray would put them (a relative target is under the home)."""

from __future__ import annotations

import stat

from tests.support.bootstrap_stubs import cluster, node_entries, run_script


def _worker(tmp_path, config):
    entries = node_entries(config, "worker", "worker_t", tmp_path)
    return run_script(entries.pop("startup-script"), tmp_path,
                      {**entries, "ray-head-address": "10.0.0.9"})


def test_bootstrap_log_is_readable_by_its_owner_only(tmp_path):
    run = _worker(tmp_path, cluster())
    assert run.returncode == 0, run.log
    assert stat.S_IMODE((tmp_path / "bootstrap.log").stat().st_mode) == 0o600


def test_a_world_readable_log_left_by_an_older_script_is_tightened(tmp_path):
    log = tmp_path / "bootstrap.log"
    log.write_text("older run\n")
    log.chmod(0o644)
    run = _worker(tmp_path, cluster())
    assert run.returncode == 0, run.log
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert log.read_text().startswith("older run\n")


def test_relative_file_mount_target_lands_under_the_home(tmp_path):
    (tmp_path / "settings.txt").write_text("x=1\n")
    config = cluster(file_mounts={"conf/settings.txt": "settings.txt"})
    run = _worker(tmp_path, config)
    assert run.returncode == 0, run.log
    assert (run.home / "conf" / "settings.txt").read_text() == "x=1\n"
