"""Local state is private (model.private_files and its writers): the state folders are 0700,
tightened on every use (an older checkout made them 0755), and every file written there is
0600 from its creation, the file_mounts archive (the user's mounted secrets) first of all."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from bootstrap.file_mounts import FileMountArchive


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def state(tmp_path, monkeypatch) -> Iterator[Path]:
    """$RAY_GCP_STATE_DIR as an older checkout left it: 0755, under the usual umask."""
    base = tmp_path / "state"
    base.mkdir(mode=0o755)
    base.chmod(0o755)
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(base))
    old = os.umask(0o022)
    yield base
    os.umask(old)


def test_the_file_mounts_archive_and_its_folders_are_private(state):
    archive = FileMountArchive(("/mnt/a",), b"the user's mounted secrets", "ab" * 32)
    folder = state / "file-mounts" / "dev"
    path = archive.write(folder)
    assert (mode(state / "file-mounts"), mode(folder), mode(path)) == (0o700, 0o700, 0o600)
    path.chmod(0o644)  # as an older checkout wrote it, the same content
    folder.chmod(0o755)
    assert mode(archive.write(folder)) == 0o600 and mode(folder) == 0o700
    assert sorted(p.name for p in folder.iterdir()) == [path.name]  # nothing partial left


def test_state_folders_are_tightened_and_their_files_are_0600(state):
    from ops.paths import mark_local_backend, open_no_follow, state_dir

    stack = state / "dev"
    stack.mkdir(mode=0o755)
    stack.chmod(0o755)
    assert state_dir("dev") == stack
    assert (mode(state), mode(stack)) == (0o700, 0o700)
    mark_local_backend("dev")
    assert mode(stack / "pulumi-backend") == 0o600
    (stack / "sync_rules.json").write_text("{}")
    (stack / "sync_rules.json").chmod(0o644)  # an older checkout's
    with open_no_follow(stack / "sync_rules.json", os.O_WRONLY | os.O_TRUNC) as handle:
        handle.write(b"{}")
    assert mode(stack / "sync_rules.json") == 0o600


def test_the_local_clusters_record_is_private(state):
    from bootstrap.local_cluster import LocalCluster, _records, state_file

    with _records() as clusters:
        clusters.append(LocalCluster(state / "c", "127.0.0.1", 1, 2, 3))
    assert mode(state_file()) == 0o600 and mode(state_file().with_suffix(".lock")) == 0o600
    assert mode(state) == 0o700


def test_a_shared_folder_with_the_sticky_bit_is_never_tightened(tmp_path):
    from model.private_files import private_folder

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    private_folder(shared)
    assert mode(shared) == 0o1777
    assert mode(private_folder(shared / "a" / "b")) == 0o700 and mode(shared / "a") == 0o700
