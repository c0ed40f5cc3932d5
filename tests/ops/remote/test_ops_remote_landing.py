"""ops.remote.landing: where a fetched entry lands is reached through folder handles opened
with O_NOFOLLOW (a link in the folders of a name is never followed, whoever made it), a file is
written whole or not at all, and a private folder is removed without following or chmodding
anything through a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ops.remote import landing
from ops.remote.untrusted import RefusedEntry


def test_a_file_under_a_folder_that_is_a_link_is_never_written_through_it(tmp_path):
    keys = tmp_path / "home" / ".ssh"
    keys.mkdir(parents=True)
    destination = tmp_path / "dest"
    destination.mkdir()
    (destination / "x").symlink_to(keys)
    with pytest.raises(RefusedEntry, match="x is a link here"), \
            landing.landed_file(destination, "x/id_ed25519", 0o600, 0) as sink:
        sink.write(b"from the node")
    with pytest.raises(RefusedEntry, match="x is a link here"):
        landing.folder(destination, "x/deeper")
    with pytest.raises(RefusedEntry, match="x is a link here"):
        landing.link("a", "x", destination, "x/l")
    with pytest.raises(RefusedEntry, match="x is a link here"):
        landing.unchanged(destination, "x/id_ed25519", 1, 0)
    assert list(keys.iterdir()) == []


def test_a_file_is_written_whole_or_not_at_all(tmp_path):
    (tmp_path / "a.txt").write_text("before")
    with pytest.raises(OSError, match="the stream broke"), \
            landing.landed_file(tmp_path, "a.txt", 0o4755, 1_600_000_000) as sink:
        sink.write(b"half")
        raise OSError("the stream broke")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.txt"]
    assert (tmp_path / "a.txt").read_text() == "before"
    with landing.landed_file(tmp_path, "a.txt", 0o4755, 1_600_000_000) as sink:
        sink.write(b"after")
    assert (tmp_path / "a.txt").read_text() == "after"
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o755
    assert int((tmp_path / "a.txt").stat().st_mtime) == 1_600_000_000


def test_a_private_folder_is_removed_without_following_or_chmodding_a_link(tmp_path):
    mine = tmp_path / "mine.txt"
    mine.write_text("mine")
    mine.chmod(0o444)
    theirs = tmp_path / "folder-of-mine"
    theirs.mkdir()
    (theirs / "kept.txt").write_text("kept")
    staging = tmp_path / "staging"
    (staging / "d" / "e").mkdir(parents=True)
    (staging / "d" / "file").write_text("f")
    (staging / "d" / "to-file").symlink_to(mine)
    (staging / "d" / "e" / "to-folder").symlink_to(theirs)
    os.mkfifo(staging / "d" / "fifo")
    (staging / "d").chmod(0o500)
    landing.remove_tree(tmp_path, "staging")
    assert not staging.exists()
    assert stat.S_IMODE(mine.stat().st_mode) == 0o444 and mine.read_text() == "mine"
    assert (theirs / "kept.txt").read_text() == "kept"
    assert stat.S_IMODE(theirs.stat().st_mode) == stat.S_IMODE(0o777 & ~_umask())


def test_a_folder_that_is_a_link_is_removed_as_a_link(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "kept.txt").write_text("kept")
    (tmp_path / "staging").symlink_to(theirs)
    landing.remove_tree(tmp_path, "staging")
    assert not (tmp_path / "staging").is_symlink()
    assert (theirs / "kept.txt").read_text() == "kept"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_paths_given_as_handles_or_paths_land_alike(tmp_path: Path):
    descriptor = landing.open_folder(tmp_path, "a/b", make=True)
    try:
        with landing.landed_file(descriptor, "c.txt", 0o644, 0) as sink:
            sink.write(b"c")
    finally:
        os.close(descriptor)
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "c"
