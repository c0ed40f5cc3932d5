"""`invoke rsync-up/rsync-down`: excludes and filter files honoured, unchanged files not resent,
file_mounts, and files and bytes counted as they go on a terminal (not in a log)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time

from model.sync_filter import DirMergeFilters, is_excluded
from tests.support.sshd_server import PROJECT_ROOT
from tests.support.tools import require_tool


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
    """Both nodes get the mount. Here they are sshds on one machine, so one disk: the nodes
    sync at once, and whichever comes second may find the file already there."""
    result = stack.invoke("file-mounts")
    assert result.returncode == 0, result.stderr
    counts = {node: (int(sent), int(kept)) for node, sent, kept in re.findall(
        r"^(ray-local-\S+): (\d+) file\(s\) sent, (\d+) unchanged$", result.stdout, re.M)}
    assert counts.keys() == {"ray-local-head-0000", "ray-local-worker-0001"}, result.stdout
    assert all(sent + kept == 1 for sent, kept in counts.values()), counts
    assert sum(sent for sent, _ in counts.values()) >= 1, counts
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


def test_filters_select_the_same_files_as_rsync_dir_merge(stack, tmp_path):
    rsync = require_tool("rsync")  # the reference
    source, ours, theirs = tmp_path / "src", tmp_path / "ours", tmp_path / "theirs"
    for relative, text in TRICKY_TREE.items():
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_text(text)
    subprocess.run([rsync, "-a", "--filter", "dir-merge,- .gitignore", f"{source}/",
                    f"{theirs}/"], check=True)
    result = stack.invoke("rsync-up", str(source), str(ours))
    assert result.returncode == 0, result.stderr
    assert files_under(ours) == files_under(theirs)
    assert len(files_under(theirs)) < len(TRICKY_TREE)  # the reference did exclude something


def test_filter_rules_without_a_filter_file_exclude_nothing():
    filters = DirMergeFilters([".gitignore"])
    filters.load("", lambda name: None)
    assert not filters.excluded("anything.log", is_dir=False)


def invoke_on_a_terminal(stack, *args: str) -> tuple[int, str, str]:
    """`invoke ARGS` with stderr on a pseudo-terminal, as in a shell: (status, stdout, what the
    terminal showed)."""
    master, terminal = pty.openpty()
    try:
        process = subprocess.Popen(stack.spawn_args(*args), cwd=PROJECT_ROOT, env=stack.env,
                                   stdout=subprocess.PIPE, stderr=terminal, text=True)
        os.close(terminal)
        shown = b""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 1)[0]:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        stdout, _ = process.communicate(timeout=120)
        return process.returncode, stdout, shown.decode(errors="replace")
    finally:
        os.close(master)


def big_tree(root, files: int = 4, size: int = 300_000):
    root.mkdir()
    for index in range(files):
        (root / f"part-{index}.bin").write_bytes(os.urandom(size))


def test_syncs_count_files_and_bytes_on_a_terminal(stack, tmp_path):
    source, remote, back = tmp_path / "src", tmp_path / "remote", tmp_path / "back"
    big_tree(source)
    status, stdout, shown = invoke_on_a_terminal(stack, "rsync-up", str(source), str(remote))
    assert status == 0, shown
    assert "4 file(s) sent" in stdout
    assert "\r\x1b[Krsync-up: 4 file(s), 1.2 MB: part-3.bin" in shown
    assert "rsync-up: 1 file(s)" in shown  # drawn as it went, not only at the end

    status, stdout, shown = invoke_on_a_terminal(stack, "rsync-down", str(remote), str(back))
    assert status == 0, shown
    assert "rsync-down: 4 file(s), 1.2 MB" in shown
    assert (back / "part-2.bin").read_bytes() == (source / "part-2.bin").read_bytes()


def test_syncs_to_every_node_show_a_bar_of_nodes_with_the_files(stack):
    status, stdout, shown = invoke_on_a_terminal(stack, "file-mounts")
    assert status == 0, shown
    # head and worker are one sshd here: the second may find the file already there
    assert "rsync-up [" in shown and re.search(r"2/2 nodes, [12] file\(s\)", shown)


def test_syncs_print_no_progress_into_a_log(stack, tmp_path):
    source, remote = tmp_path / "src", tmp_path / "remote"
    big_tree(source)
    up = stack.invoke("rsync-up", str(source), str(remote))
    down = stack.invoke("rsync-down", str(remote), str(tmp_path / "back"))
    assert up.returncode == down.returncode == 0, up.stderr + down.stderr
    assert "4 file(s) sent" in up.stdout and "4 file(s) sent" in down.stdout
    for result in (up, down):
        assert "rsync-" not in result.stderr and "\r" not in result.stderr
