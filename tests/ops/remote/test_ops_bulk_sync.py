"""`invoke rsync-up` both ways it sends: as one tar stream over the system's OpenSSH
(ops.remote.tar_stream, the default when ssh is installed) and over paramiko's SFTP (the
fallback, forced here with RAY_GCP_SYNC=sftp, and taken for a node without tar). Either way:
unchanged files are skipped by size and mtime, `--checksum` catches a same-size change, modes
and mtimes are kept, a link to a file arrives as the file and a link to a folder as an empty
folder (one leading outside the folder sent is left out unless --copy-links), a link on the
node is replaced and not written through, folders on the node keep their modes, nothing is
deleted, and a host key other than the pinned one stops the transfer."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ops.remote.openssh import system_ssh
from tests.support.sshd_server import keygen
from tests.support.sync_shims import logging_ssh, logging_tar
from tests.support.tools import require_tool

WAYS = {"tar": {}, "tarfile": {}, "sftp": {"RAY_GCP_SYNC": "sftp"}}
"""tar: the system's GNU tar writes a folder's stream; tarfile: the tar on PATH is not GNU's
(as on a Mac), so Python's tarfile writes it; sftp: paramiko's SFTP."""


@pytest.fixture(params=sorted(WAYS))
def way(request, stack, tmp_path):
    """The stack, sending the parametrised way; `ssh` notes each run in `stack.ssh_log`,
    the local `tar` each in `stack.tar_log`."""
    stack.ssh_log = tmp_path / "ssh-runs.log"
    logging_ssh(tmp_path / "shims", stack.ssh_log)
    stack.tar_log = tmp_path / "tar-runs.log"
    logging_tar(tmp_path / "shims", stack.tar_log, gnu=request.param != "tarfile")
    stack.env = {**stack.env, **WAYS[request.param],
                 "PATH": f"{tmp_path / 'shims'}{os.pathsep}{stack.env['PATH']}"}
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
    assert way.ssh_log.exists() == (way.way != "sftp")  # the way it said it went
    assert way.tar_log.exists() == (way.way == "tar")


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
    source, remote = tmp_path / "src", tmp_path / "remote"
    (source / "folder").mkdir(parents=True)
    (source / "folder" / "inside.txt").write_text("sent once\n")
    (source / "real.txt").write_text("real\n")
    (source / "to-file").symlink_to("real.txt")
    (source / "to-folder").symlink_to("folder")
    send(way, source, remote)
    assert not (remote / "to-file").is_symlink()
    assert (remote / "to-file").read_text() == "real\n"
    assert (remote / "to-folder").is_dir() and not (remote / "to-folder").is_symlink()
    assert list((remote / "to-folder").iterdir()) == []


def test_a_link_leading_outside_the_folder_is_left_out_unless_copy_links(way, tmp_path):
    """A repo's `creds -> ~/.aws/credentials` never lands on the head (which every job can
    read) unless --copy-links asks for what it names; rsync -a would send the link."""
    source, remote, home = tmp_path / "src", tmp_path / "remote", tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("secret\n")
    (source / "sub").mkdir(parents=True)
    (source / "kept.txt").write_text("kept\n")
    (source / "creds").symlink_to(home / ".aws" / "credentials")
    (source / "sub" / "up").symlink_to("../../home/.aws/credentials")
    (source / "sub" / "chain").symlink_to("../creds")  # inside, then out
    (source / "aws").symlink_to(home / ".aws")
    result = way.invoke("rsync-up", str(source), str(remote))
    assert result.returncode == 0, result.stderr
    assert "1 file(s) sent, 0 unchanged, 4 left out" in result.stdout
    assert sorted(path.relative_to(remote).as_posix() for path in remote.rglob("*")) == [
        "kept.txt", "sub"]
    for name in ("'creds'", "'sub/up'", "'sub/chain'", "'aws'"):
        assert f"left out {source}/{name}: it links to" in result.stderr, name
    assert "--copy-links" in result.stderr
    assert "3 file(s) sent" in send(way, source, remote, "--copy-links")
    assert (remote / "creds").read_text() == "secret\n"
    assert (remote / "sub" / "chain").read_text() == "secret\n"


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


def test_without_ssh_on_path_the_sftp_way_is_chosen(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_GCP_SYNC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no ssh in it
    assert system_ssh() is None
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert system_ssh() is not None
    monkeypatch.setenv("RAY_GCP_SYNC", "sftp")
    assert system_ssh() is None


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


def test_a_send_is_one_ssh_run_and_leaves_unchanged_files_alone(stack, tmp_path):
    source, remote = tmp_path / "src", tmp_path / "remote"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "a.txt").write_text("a\n")
    (source / "b.txt").write_text("b\n")
    stack.ssh_log = tmp_path / "ssh-runs.log"
    logging_ssh(tmp_path / "shims", stack.ssh_log)
    stack.env = {**stack.env, "PATH": f"{tmp_path / 'shims'}{os.pathsep}{stack.env['PATH']}"}
    assert "2 file(s) sent" in send(stack, source, remote)
    assert stack.ssh_log.read_text().count("run") == 1  # asked what is there, then streamed
    before = (remote / "sub" / "a.txt").stat().st_ino
    (source / "b.txt").write_text("b, longer\n")
    assert "1 file(s) sent, 1 unchanged" in send(stack, source, remote)
    assert (remote / "sub" / "a.txt").stat().st_ino == before  # not unpacked again
    assert (remote / "b.txt").read_text() == "b, longer\n"
    assert stack.ssh_log.read_text().count("run") == 2


def test_a_large_file_arrives_whole(way, tmp_path):
    source, remote = tmp_path / "big.bin", tmp_path / "remote" / "big.bin"
    source.write_bytes(os.urandom(3 * (1 << 20) + 12345))  # several reads of the stream
    assert "1 file(s) sent" in send(way, source, remote)
    assert remote.read_bytes() == source.read_bytes()


def test_folders_already_on_the_node_keep_their_modes(way, tmp_path):
    """Sending into a folder the node has (a home folder, say) must not loosen it."""
    source, remote = tmp_path / "src", tmp_path / "remote"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "a.txt").write_text("a\n")
    source.chmod(0o755)
    (source / "sub").chmod(0o777)
    (remote / "sub").mkdir(parents=True)
    remote.chmod(0o700)
    (remote / "sub").chmod(0o750)
    send(way, source, remote)
    assert stat.S_IMODE(remote.stat().st_mode) == 0o700
    assert stat.S_IMODE((remote / "sub").stat().st_mode) == 0o750
    assert (remote / "sub" / "a.txt").read_text() == "a\n"


def test_a_link_on_the_node_is_replaced_not_written_through(way, tmp_path):
    source, remote, aside = tmp_path / "src", tmp_path / "remote", tmp_path / "aside.txt"
    source.mkdir()
    (source / "a.txt").write_text("new\n")
    aside.write_text("not yours\n")
    remote.mkdir()
    (remote / "a.txt").symlink_to(aside)
    send(way, source, remote)
    assert aside.read_text() == "not yours\n"
    assert not (remote / "a.txt").is_symlink()
    assert (remote / "a.txt").read_text() == "new\n"


def test_a_destination_the_node_cannot_make_is_one_line(way, tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.txt").write_text("a\n")
    (tmp_path / "plain-file").write_text("not a folder\n")
    result = way.invoke("rsync-up", str(source), str(tmp_path / "plain-file" / "below"))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "not a directory" in result.stderr.lower() and "plain-file" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("node_tar", ["none", "not GNU's"])
def test_a_node_without_gnu_tar_is_served_over_sftp(node_tar, local_sshd, tmp_path,
                                                     monkeypatch):
    """The node's PATH has what the stat step uses but no tar, or a tar that is not GNU's
    (whose options the stream uses): the stream is refused there and the files go over
    SFTP."""
    from tests.support.sshd_fixture import make_stack

    tools = tmp_path / "node-bin"
    tools.mkdir()
    for program in ("mkdir", "stat", "xargs", "sha256sum", "head"):
        (tools / program).symlink_to(require_tool(program))
    if node_tar == "not GNU's":
        (tools / "tar").write_text('#!/bin/sh\necho "bsdtar 3.7.2 - libarchive 3.7.2"\n')
        (tools / "tar").chmod(0o755)
    server_dir = tmp_path / "sshd"
    server_dir.mkdir()
    with local_sshd(server_dir, set_env={"PATH": str(tools)}) as server:
        stack = make_stack(server, tmp_path, monkeypatch, pin=True)
        stack.ssh_log = tmp_path / "ssh-runs.log"
        logging_ssh(tmp_path / "shims", stack.ssh_log)
        stack.env = {**stack.env,
                     "PATH": f"{tmp_path / 'shims'}{os.pathsep}{stack.env['PATH']}"}
        source, remote = tmp_path / "src", tmp_path / "remote"
        source.mkdir()
        (source / "a.txt").write_text("a\n")
        assert "1 file(s) sent" in send(stack, source, remote)
    assert stack.ssh_log.read_text().count("run") == 1  # asked, refused, then SFTP
    assert (remote / "a.txt").read_text() == "a\n"


def test_odd_names_arrive_as_themselves_and_are_skipped_when_unchanged(way, tmp_path):
    """Blanks, a line break, a leading dash, non-ASCII: the names travel NUL-separated."""
    source, remote = tmp_path / "src", tmp_path / "remote"
    names = ["two words.txt", "line\nbreak.txt", "-leading-dash", "Grüße ☃.txt"]
    (source / "sub folder").mkdir(parents=True)
    for name in names:
        (source / "sub folder" / name).write_text(name)
    assert f"{len(names)} file(s) sent" in send(way, source, remote)
    assert sorted(path.name for path in (remote / "sub folder").iterdir()) == sorted(names)
    assert all((remote / "sub folder" / name).read_text() == name for name in names)
    assert f"0 file(s) sent, {len(names)} unchanged" in send(way, source, remote)
