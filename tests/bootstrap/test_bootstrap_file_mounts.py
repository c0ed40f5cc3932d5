"""The file_mounts archive: every entry, files and folders, in one content-named archive that
skips what rsync_exclude and rsync_filter skip; a bad local path or too much data is one
error naming the YAML path and the fix."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from bootstrap import file_mounts
from bootstrap.file_mounts import pack_file_mounts
from model.config import ConfigError
from tests.support.bootstrap_stubs import cluster

KEY = "5e" * 32  # a stack's secret (infra/stack_secret.py)


def packed(config, root):
    """The archive as a stack with KEY stores it."""
    return pack_file_mounts(config, root).keyed(KEY)


def _members(archive) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive.content), mode="r:gz") as tar:
        return {member.name: member for member in tar.getmembers()}


def _read(archive, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(archive.content), mode="r:gz") as tar:
        return tar.extractfile(name).read()


def _project(root):
    (root / "proj" / "pkg").mkdir(parents=True)
    (root / "proj" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "proj" / "pkg" / "mod.pyc").write_bytes(b"\0")
    (root / "proj" / ".git").mkdir()
    (root / "proj" / ".git" / "HEAD").write_text("ref\n")
    (root / "proj" / "build").mkdir()
    (root / "proj" / "build" / "out.bin").write_bytes(b"\1")
    (root / "proj" / ".gitignore").write_text("build/\n")
    (root / "proj" / "run.sh").write_text("#!/bin/sh\n")
    (root / "proj" / "run.sh").chmod(0o755)
    (root / "proj" / "link").symlink_to("run.sh")
    (root / "one.txt").write_text("hello")
    return root


def test_files_and_folders_become_numbered_members_in_target_order(tmp_path):
    _project(tmp_path)
    archive = packed(
        cluster(file_mounts={"~/proj": "proj", "/opt/one.txt": "one.txt"}), tmp_path)
    assert archive.targets == ("/opt/one.txt", "~/proj")
    members = _members(archive)
    assert _read(archive, "0") == b"hello"
    assert members["1"].isdir() and _read(archive, "1/pkg/mod.py") == b"x = 1\n"
    assert members["1/run.sh"].mode == 0o755
    assert members["1/link"].issym() and members["1/link"].linkname == "run.sh"


def test_rsync_exclude_and_rsync_filter_files_are_honoured(tmp_path):
    _project(tmp_path)
    config = cluster(file_mounts={"~/proj": "proj"}, rsync_exclude=["**/.git", "*.pyc"],
                     rsync_filter=[".gitignore"])
    names = set(_members(packed(config, tmp_path)))
    assert "0/pkg/mod.py" in names and "0/.gitignore" in names
    assert not {"0/.git", "0/.git/HEAD", "0/pkg/mod.pyc", "0/build", "0/build/out.bin"} & names


def test_the_same_files_give_the_same_object_and_one_changed_byte_a_new_one(tmp_path):
    _project(tmp_path)
    config = cluster(file_mounts={"~/proj": "proj"})
    first, again = packed(config, tmp_path), packed(config, tmp_path)
    assert first.content == again.content and first.object_name == again.object_name
    assert first.object_name.startswith("file-mounts/") and first.object_name.endswith(".tar.gz")
    (tmp_path / "proj" / "pkg" / "mod.py").write_text("x = 2\n")
    assert packed(config, tmp_path).object_name != first.object_name


def test_key_like_files_travel_in_the_archive_like_any_other(tmp_path):
    (tmp_path / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    archive = packed(cluster(file_mounts={"~/.ssh/id_rsa": "id_rsa"}), tmp_path)
    assert _read(archive, "0") == b"-----BEGIN OPENSSH PRIVATE KEY-----\n"


def test_no_file_mounts_means_no_archive(tmp_path):
    assert pack_file_mounts(cluster(), tmp_path) is None


@pytest.mark.parametrize("source", ["missing", "", "fifo", "dangling"])
def test_an_unusable_local_path_names_the_yaml_path_and_the_fix(tmp_path, source):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ConfigError) as error:
        pack_file_mounts(cluster(file_mounts={"~/data": source}), tmp_path)
    [(where, message)] = error.value.problems
    assert where == "file_mounts.~/data"
    assert any(fix in message for fix in ("fix the", "name a file", "mount a file"))


def test_mounts_over_the_limit_say_the_limit_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(file_mounts, "MOUNT_SIZE_LIMIT", 3 * 1024 * 1024)
    (tmp_path / "data").mkdir()
    for name in "abcd":
        (tmp_path / "data" / name).write_bytes(b"\0" * 1024 * 1024)
    with pytest.raises(ConfigError) as error:
        pack_file_mounts(cluster(file_mounts={"~/data": "data"}), tmp_path)
    [(where, message)] = error.value.problems
    assert where == "file_mounts.~/data"
    assert "more than 3 MB" in message and "rsync_exclude" in message


def test_an_unreadable_file_inside_a_folder_is_named(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "locked").write_text("x")
    real_open = Path.open

    def refuse(path, *args, **kwargs):  # what a mode-000 file does to a non-root user
        if path.name == "locked":
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(ConfigError) as error:
        pack_file_mounts(cluster(file_mounts={"~/data": "data"}), tmp_path)
    assert "locked cannot be read (Permission denied)" in error.value.problems[0][1]


def test_the_name_and_bytes_depend_on_the_stacks_key_not_on_the_content_alone(tmp_path):
    """A name that a bare hash of the content could reproduce lets anyone who reads the
    metadata test guesses of a short secret file; under another stack's key the same files
    get another name and other bytes (the engine hashes the bytes it uploads), and an empty
    key, which would make the HMAC public, is refused."""
    (tmp_path / "pin").write_text("4821")
    tar = pack_file_mounts(cluster(file_mounts={"~/pin": "pin"}), tmp_path)
    ours, theirs = tar.keyed(KEY), tar.keyed("a1" * 32)
    assert ours.object_name != theirs.object_name and ours.content != theirs.content
    assert _read(ours, "0") == _read(theirs, "0") == b"4821"
    for plain in (hashlib.sha256(tar.tar).hexdigest(), hashlib.sha256(b"4821").hexdigest(),
                  hashlib.sha256(gzip.compress(tar.tar, mtime=0)).hexdigest()):
        assert plain not in ours.object_name
    assert hashlib.sha256(ours.content).hexdigest() != hashlib.sha256(theirs.content).hexdigest()
    with pytest.raises(ValueError, match="key is empty"):
        tar.keyed("")
