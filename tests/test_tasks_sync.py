"""`invoke rsync-up/rsync-down`: excludes and filter files honoured, unchanged files not resent,
file_mounts."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ops.sync import is_excluded
from ops.sync_filter import DirMergeFilters

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


def make_gitignored_tree(root):
    """A .gitignore at the top and a nested one; the cluster YAML has rsync_filter [.gitignore]."""
    files = {
        ".gitignore": "*.log\n/out/\n",
        "keep.py": "", "app.log": "", "out/x": "",
        "sub/.gitignore": "# nested rules apply from sub/ down\nsecret.txt\n/local/\ndata/*.csv\n",
        "sub/secret.txt": "", "sub/trace.log": "", "sub/local/y": "", "sub/out/z": "",
        "sub/data/a.csv": "", "sub/data/b.txt": "", "sub/deeper/data/c.csv": "",
        "other/secret.txt": "", "other/local/w": "", "other/data/d.csv": "",
    }
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)


GITIGNORE_KEPT = [
    ".gitignore", "keep.py", "other/data/d.csv", "other/local/w", "other/secret.txt",
    "sub/.gitignore", "sub/data/b.txt", "sub/out/z",
]


def files_under(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_rsync_up_and_down_honour_nested_gitignore_filters(stack, tmp_path):
    source, remote, back = tmp_path / "src", tmp_path / "remote", tmp_path / "back"
    make_gitignored_tree(source)
    up = stack.invoke("rsync-up", str(source), str(remote))
    assert up.returncode == 0, up.stderr
    assert files_under(remote) == GITIGNORE_KEPT
    # the excluded files now exist remotely too: rsync-down must read the remote .gitignores
    make_gitignored_tree(remote)
    down = stack.invoke("rsync-down", str(remote), str(back))
    assert down.returncode == 0, down.stderr
    assert files_under(back) == GITIGNORE_KEPT


def test_file_mounts_honour_gitignore_filters(stack):
    mounts = stack.workdir / "mounts"
    (mounts / ".gitignore").write_text("*.tmp\n")
    (mounts / "scratch.tmp").write_text("")
    result = stack.invoke("file-mounts")
    assert result.returncode == 0, result.stderr
    assert files_under(stack.workdir / "remote-mount") == [".gitignore", "data.txt"]


TRICKY_TREE = {
    ".gitignore": "nested/*.tmp\n**/cache/**\nfile?.txt\n[ab]*.dat\nlogs/***\nnotadir.txt/\n",
    "nested/x.tmp": "", "deep/nested/y.tmp": "", "deep/nested/more/z.tmp": "",
    "p/cache/q/r": "", "p/cache/s": "", "cache/top": "",
    "file1.txt": "", "file12.txt": "", "a1.dat": "", "c1.dat": "", "sub/b2.dat": "",
    "logs/one": "", "sub/logs/two": "", "notadir.txt": "",
    "sub/.gitignore": "/anchored.txt\nx/y\nm/**/b2\n/**/b3\n",
    "sub/m/b2/f": "", "sub/m/n/b2/f": "", "sub/b3/f": "", "sub/k/b3/f": "",
    "sub/anchored.txt": "", "sub/deep/anchored.txt": "", "sub/x/y": "", "sub/q/x/y": "",
}


@pytest.mark.skipif(shutil.which("rsync") is None, reason="needs rsync as the reference")
def test_filters_select_the_same_files_as_rsync_dir_merge(stack, tmp_path):
    source, ours, theirs = tmp_path / "src", tmp_path / "ours", tmp_path / "theirs"
    for relative, text in TRICKY_TREE.items():
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_text(text)
    subprocess.run(["rsync", "-a", "--filter", "dir-merge,- .gitignore", f"{source}/",
                    f"{theirs}/"], check=True)
    result = stack.invoke("rsync-up", str(source), str(ours))
    assert result.returncode == 0, result.stderr
    assert files_under(ours) == files_under(theirs)
    assert len(files_under(theirs)) < len(TRICKY_TREE)  # the reference did exclude something


def test_filter_rules_without_a_filter_file_exclude_nothing():
    filters = DirMergeFilters([".gitignore"])
    filters.load("", lambda name: None)
    assert not filters.excluded("anything.log", is_dir=False)
