"""The base tree `invoke diff` plans is read whole from `git archive`, whatever its size.

git pads its tar to whole 10 KiB records after the two end-of-archive blocks. When the first
end block is the last block of a record, tarfile stops reading there and the next record is
still to come; closing the pipe then killed git with SIGPIPE, which `invoke diff` reported as
"git archive HEAD failed: " (CI saw it once, on a loaded machine). The real git runs here;
the `git` first on PATH only holds its last record back for a moment, as a slow pipe would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ops.errors import OpsError
from ops.review.plan_base import materialise_tree

RECORD = 10240
BLOCK = tarfile.BLOCKSIZE

SLOW_GIT = """#!{python}
import os, signal, subprocess, sys, time
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # die as git would on a closed pipe
data = subprocess.run([{git!r}, *sys.argv[1:]], stdout=subprocess.PIPE, check=True).stdout
out = sys.stdout.buffer
if "archive" in sys.argv:
    out.write(data[:-{record}])
    out.flush()
    time.sleep(0.5)
    out.write(data[-{record}:])
else:
    out.write(data)
out.flush()
"""


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A one-file repository whose archive's first end block is the last of a record. The
    tree is archived (`HEAD:`, as `invoke diff` does), so there is no commit header: the
    file's header and 18 blocks of content fill 19 of the record's 20."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "data.txt").write_bytes(b"a" * (RECORD - 2 * BLOCK))
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one file"], check=True)
    archive = subprocess.run([*git, "archive", "--format=tar", "HEAD:"], check=True,
                             stdout=subprocess.PIPE).stdout
    end = archive.index(bytes(2 * BLOCK), BLOCK)
    assert (len(archive), end % RECORD) == (2 * RECORD, RECORD - BLOCK), "layout as described"
    return root


@pytest.fixture
def slow_git_first_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_git = subprocess.run(["sh", "-c", "command -v git"], check=True, text=True,
                              stdout=subprocess.PIPE).stdout.strip()
    tools = tmp_path / "tools"
    tools.mkdir()
    wrapper = tools / "git"
    wrapper.write_text(SLOW_GIT.format(python=sys.executable, git=real_git, record=RECORD))
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")


def test_a_base_tree_whose_end_marker_ends_a_record_is_extracted_without_killing_git(
        repository: Path, slow_git_first_on_path: None, tmp_path: Path) -> None:
    dest = tmp_path / "base"
    dest.mkdir()
    materialise_tree("HEAD", dest, repository)
    assert (dest / "data.txt").read_bytes() == (repository / "data.txt").read_bytes()


def committed(root: Path, links: dict[str, str]) -> Path:
    """A repository with a file in a folder and the symbolic links `links` (name -> target)."""
    root.mkdir()
    (root / "infra").mkdir()
    (root / "infra" / "program.py").write_text("print('base')\n")
    for name, target in links.items():
        (root / name).symlink_to(target)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    return root


def test_links_inside_the_base_tree_are_extracted_as_links(tmp_path: Path) -> None:
    root = committed(tmp_path / "repo", {"current": "infra", "entry": "infra/program.py"})
    dest = tmp_path / "base"
    dest.mkdir()
    materialise_tree("HEAD", dest, root)
    assert os.readlink(dest / "current") == "infra"
    assert (dest / "entry").read_text() == "print('base')\n"


@pytest.mark.parametrize("links", [
    {"escape": "../../outside"},
    {"absolute": "/etc"},
    # each link stays inside on its own; through the first, the second leaves the tree
    {"up": "infra/..", "infra/up": "..", "far": "infra/up/../.."},
])
def test_a_base_tree_link_leading_out_of_the_tree_is_refused_in_one_line(
        tmp_path: Path, links: dict[str, str]) -> None:
    root = committed(tmp_path / "repo", links)
    dest = tmp_path / "base"
    dest.mkdir()
    with pytest.raises(OpsError, match=r"could not extract the tree at HEAD: '.*' is not a "
                                        r"file, folder or link inside the tree"):
        materialise_tree("HEAD", dest, root)
    assert not (tmp_path / "outside").exists()
