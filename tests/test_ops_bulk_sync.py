"""`invoke rsync-up` both ways it sends: through the system's rsync over OpenSSH
(ops.remote.system_rsync, the default when both are installed) and over paramiko's SFTP (the
fallback, forced here with RAY_GCP_SYNC=sftp). Either way: unchanged files are skipped by size
and mtime, `--checksum` catches a same-size change, modes and mtimes are kept, a link to a
file arrives as the file and a link to a folder as an empty folder, nothing is deleted, and
a host key other than the pinned one stops the transfer."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sshd_server import keygen
from tools import require_tool

from ops.remote.openssh import system_tools

pytest_plugins = ["sshd_fixture"]  # the sshd and stack fixtures

WAYS = {"rsync": {}, "sftp": {"RAY_GCP_SYNC": "sftp"}}


@pytest.fixture(params=sorted(WAYS))
def way(request, stack, tmp_path):
    """The stack, sending the parametrised way; `rsync` first on PATH notes each run in
    `stack.rsync_log` and hands over to the system's."""
    shims = tmp_path / "shims"
    shims.mkdir()
    stack.rsync_log = tmp_path / "rsync-runs.log"
    rsync = require_tool("rsync") if request.param == "rsync" else "/nonexistent/rsync"
    (shims / "rsync").write_text(f'#!/bin/sh\necho run >> "{stack.rsync_log}"\n'
                                 f'exec "{rsync}" "$@"\n')
    (shims / "rsync").chmod(0o755)
    stack.env = {**stack.env, **WAYS[request.param],
                 "PATH": f"{shims}{os.pathsep}{stack.env['PATH']}"}
    stack.way = request.param
    return stack


def send(stack, source: Path, target: Path, *flags: str) -> str:
    result = stack.invoke("rsync-up", *flags, str(source), str(target))
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_unchanged_files_are_skipped_by_size_and_mtime(way, tmp_path):
    source, remote = tmp_path / "src", tmp_path / "remote"
    (source / "sub").mkdir(parents=True)
    (source / "a.txt").write_text("alpha\n")
    (source / "sub" / "b.txt").write_text("beta\n")
    assert "2 file(s) sent, 0 unchanged" in send(way, source, remote)
    assert "0 file(s) sent, 2 unchanged" in send(way, source, remote)

    os.utime(source / "a.txt", (1_600_000_000, 1_600_000_000))  # same bytes, older mtime
    assert "1 file(s) sent, 1 unchanged" in send(way, source, remote)
    assert int((remote / "a.txt").stat().st_mtime) == 1_600_000_000
    assert way.rsync_log.exists() == (way.way == "rsync")  # the way it said it went


def test_checksum_catches_a_same_size_change_that_mtime_misses(way, tmp_path):
    source, remote = tmp_path / "src", tmp_path / "remote"
    source.mkdir()
    (source / "model.bin").write_bytes(b"A" * 4096)
    (source / "same.bin").write_bytes(b"S" * 100)
    send(way, source, remote)
    when = (source / "model.bin").stat().st_mtime_ns
    (source / "model.bin").write_bytes(b"B" * 4096)  # same size ...
    os.utime(source / "model.bin", ns=(when, when))  # ... and same mtime
    assert "0 file(s) sent, 2 unchanged" in send(way, source, remote)
    assert (remote / "model.bin").read_bytes() == b"A" * 4096

    assert "1 file(s) sent, 1 unchanged" in send(way, source, remote, "--checksum")
    assert (remote / "model.bin").read_bytes() == b"B" * 4096


def test_a_single_file_checksum_compares_its_content(way, tmp_path):
    source, remote = tmp_path / "weights.bin", tmp_path / "remote" / "weights.bin"
    source.write_bytes(b"1" * 64)
    send(way, source, remote)
    when = source.stat().st_mtime_ns
    source.write_bytes(b"2" * 64)
    os.utime(source, ns=(when, when))
    assert "0 file(s) sent, 1 unchanged" in send(way, source, remote)
    assert "1 file(s) sent, 0 unchanged" in send(way, source, remote, "--checksum")
    assert remote.read_bytes() == b"2" * 64


def test_modes_and_mtimes_are_kept(way, tmp_path):
    source, remote = tmp_path / "src", tmp_path / "remote"
    source.mkdir()
    (source / "run.sh").write_text("#!/bin/sh\n")
    (source / "run.sh").chmod(0o750)
    (source / "notes.txt").write_text("n\n")
    (source / "notes.txt").chmod(0o600)
    os.utime(source / "notes.txt", (1_500_000_000, 1_500_000_000))
    send(way, source, remote)
    assert stat.S_IMODE((remote / "run.sh").stat().st_mode) == 0o750
    assert stat.S_IMODE((remote / "notes.txt").stat().st_mode) == 0o600
    assert int((remote / "notes.txt").stat().st_mtime) == 1_500_000_000


def test_links_arrive_as_the_file_and_as_an_empty_folder(way, tmp_path):
    source, remote, elsewhere = tmp_path / "src", tmp_path / "remote", tmp_path / "elsewhere"
    source.mkdir()
    elsewhere.mkdir()
    (elsewhere / "inside.txt").write_text("not sent\n")
    (source / "real.txt").write_text("real\n")
    (source / "to-file").symlink_to("real.txt")
    (source / "to-folder").symlink_to(elsewhere)
    send(way, source, remote)
    assert not (remote / "to-file").is_symlink()
    assert (remote / "to-file").read_text() == "real\n"
    assert (remote / "to-folder").is_dir() and not (remote / "to-folder").is_symlink()
    assert list((remote / "to-folder").iterdir()) == []


def test_nothing_is_deleted_on_the_node(way, tmp_path):
    source, remote = tmp_path / "src", tmp_path / "remote"
    source.mkdir()
    (source / "kept.txt").write_text("k\n")
    remote.mkdir()
    (remote / "only-there.txt").write_text("mine\n")
    send(way, source, remote)
    assert (remote / "only-there.txt").read_text() == "mine\n"
    assert (remote / "kept.txt").read_text() == "k\n"


def test_a_host_key_other_than_the_pinned_one_stops_the_transfer(way, sshd, tmp_path):
    known_hosts = way.state_dir / way.name / "known_hosts"
    other = keygen(tmp_path / "other_host_key")
    kind, blob = Path(f"{other}.pub").read_text().split()[:2]
    known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {kind} {blob}\n")
    source = tmp_path / "secret.txt"
    source.write_text("must not arrive\n")
    result = way.invoke("rsync-up", str(source), str(tmp_path / "remote" / "secret.txt"))
    assert result.returncode != 0
    assert "pinned" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "remote").exists()


def test_every_node_gets_the_files_through_the_head(way, tmp_path):
    source, remote = tmp_path / "src", tmp_path / "remote"
    source.mkdir()
    (source / "a.txt").write_text("a\n")
    out = send(way, source, remote, "--all-nodes")
    assert "ray-local-head-0000:" in out and "ray-local-worker-0001:" in out
    assert (remote / "a.txt").read_text() == "a\n"


def test_without_rsync_or_ssh_on_path_the_sftp_way_is_chosen(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_GCP_SYNC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # neither tool in it
    assert system_tools() is None
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert system_tools() is not None
    monkeypatch.setenv("RAY_GCP_SYNC", "sftp")
    assert system_tools() is None


def test_names_rsync_would_read_as_patterns_are_sent_as_themselves(way, tmp_path):
    """A file named `b*`, left out by the .gitignore (rsync_filter), must not take `bX.txt`
    with it; `odd[1]?.txt` is sent as itself."""
    source, remote = tmp_path / "src", tmp_path / "remote"
    source.mkdir()
    (source / ".gitignore").write_text("b[*]\n")
    for name in ("b*", "bX.txt", "odd[1]?.txt"):
        (source / name).write_text(name)
    assert "3 file(s) sent" in send(way, source, remote)
    assert sorted(path.name for path in remote.iterdir()) == [".gitignore", "bX.txt",
                                                             "odd[1]?.txt"]
