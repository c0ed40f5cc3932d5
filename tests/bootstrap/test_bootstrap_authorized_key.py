"""With OS Login the guest ignores `ssh-keys`, so the startup script itself authorizes the
cluster's public key (metadata `ray-authorized-key`) for the node's user: the head's Ray keeps
reaching the workers with the cluster key. Once, whatever how often the node boots."""

from __future__ import annotations

import stat

from bootstrap.node_metadata import AUTHORIZED_KEY_KEY
from tests.support.bootstrap_stubs import HEAD_INTERNAL_IP, cluster, node_entries, run_script

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq0lTestKeyOfTheClusterOnlyForThisTest"


def _boot(tmp_path, extra: dict[str, str]):
    config = cluster(provider={"type": "gcp", "region": "us-west1",
                               "availability_zone": "us-west1-a", "project_id": "p",
                               "os_login": {"principal": "user:me@example.com"}})
    entries = node_entries(config, "worker", "worker_t", tmp_path)
    return run_script(entries.pop("startup-script"), tmp_path,
                      {**entries, "ray-head-address": HEAD_INTERNAL_IP, **extra})


def test_the_cluster_key_is_authorized_once_across_boots(tmp_path):
    first = _boot(tmp_path, {AUTHORIZED_KEY_KEY: KEY})
    assert first.returncode == 0, first.log
    again = _boot(tmp_path, {AUTHORIZED_KEY_KEY: KEY})
    assert again.returncode == 0, again.log
    authorized = first.home / ".ssh" / "authorized_keys"
    assert authorized.read_text() == KEY + "\n"
    assert stat.S_IMODE(authorized.stat().st_mode) == 0o600
    assert stat.S_IMODE(authorized.parent.stat().st_mode) == 0o700


def test_without_the_key_nothing_is_written(tmp_path):
    run = _boot(tmp_path, {})
    assert run.returncode == 0, run.log
    assert not (run.home / ".ssh").exists()
