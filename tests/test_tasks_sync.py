"""`invoke rsync-up/rsync-down`: excludes honoured, unchanged files not resent, file_mounts."""

from __future__ import annotations

import os

from ops.sync import is_excluded

pytest_plugins = ["sshd_fixture"]  # the sshd and stack fixtures


def make_tree(root):
    (root / "pkg" / ".git").mkdir(parents=True)
    (root / "pkg" / ".git" / "HEAD").write_text("ref\n")
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "pkg" / "mod.pyc").write_bytes(b"\0")
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_bytes(b"\1" * 10)
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)


def test_rsync_up_honours_excludes_and_skips_unchanged(stack, tmp_path):
    source, remote = tmp_path / "src", tmp_path / "remote"
    make_tree(source)
    first = stack.invoke("rsync-up", str(source), str(remote))
    assert first.returncode == 0, first.stderr
    assert "2 file(s) sent" in first.stdout
    assert sorted(str(p.relative_to(remote)) for p in remote.rglob("*") if p.is_file()) == [
        "pkg/mod.py", "run.sh",
    ]
    assert os.access(remote / "run.sh", os.X_OK)

    second = stack.invoke("rsync-up", str(source), str(remote))
    assert "0 file(s) sent, 2 unchanged" in second.stdout

    (source / "pkg" / "mod.py").write_text("x = 22\n")
    third = stack.invoke("rsync-up", str(source), str(remote))
    assert "1 file(s) sent, 1 unchanged" in third.stdout
    assert (remote / "pkg" / "mod.py").read_text() == "x = 22\n"


def test_rsync_down_fetches_changed_files_only(stack, tmp_path):
    remote, local = tmp_path / "on-head", tmp_path / "local"
    make_tree(remote)
    first = stack.invoke("rsync-down", str(remote), str(local))
    assert first.returncode == 0, first.stderr
    assert (local / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert not (local / "pkg" / ".git").exists() and not (local / "build").exists()
    second = stack.invoke("rsync-down", str(remote), str(local))
    assert "0 file(s) sent, 2 unchanged" in second.stdout


def test_file_mounts_sync_to_every_node(stack):
    result = stack.invoke("file-mounts")
    assert result.returncode == 0, result.stderr
    assert "ray-local-head-0000: 1 file(s) sent" in result.stdout
    assert "ray-local-worker-0001:" in result.stdout
    assert (stack.workdir / "remote-mount" / "data.txt").read_text() == "mounted\n"


def test_exclude_patterns_match_like_rsync():
    patterns = ["**/.git", "*.pyc", "build/"]
    assert is_excluded("a/b/.git", patterns) and is_excluded(".git", patterns)
    assert is_excluded("deep/x.pyc", patterns) and is_excluded("build", patterns)
    assert not is_excluded("src/git.py", patterns)
