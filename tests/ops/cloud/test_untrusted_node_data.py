"""Everything read from a node is untrusted data: rsync-down, cluster-dump and captured
commands driven through a hostile SSH/SFTP server on 127.0.0.1 (tests/fakes/hostile_node.py)."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import tarfile
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import paramiko
import pytest

from ops.cloud.cluster_dump import DumpParts, cluster_dump
from ops.remote.commands import run_captured
from ops.remote.sync import sync_down
from ops.stacks.stack import Node
from tests.fakes.hostile_node import Entry, Tree, hostile_node

FILE, FOLDER, LINK = stat.S_IFREG, stat.S_IFDIR, stat.S_IFLNK
SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


def hostile_tree() -> Tree:
    return Tree({
        "src": [
            Entry("../../escaped.txt", FILE | 0o644, b"escaped"),
            Entry("/tmp/absolute.txt", FILE | 0o644, b"absolute"),
            Entry("setuid.sh", FILE | 0o4777, b"#!/bin/sh\n"),
            Entry("sticky", FILE | 0o3755, b"x"),
            Entry("same", LINK | 0o777, link="setuid.sh"),
            Entry("same", FOLDER | 0o755),
            Entry("link-out", LINK | 0o777, link="/etc/passwd"),
            Entry("link-up", LINK | 0o777, link="../../outside"),
            Entry("link-in", LINK | 0o777, link="sub/deep.txt"),
            Entry("trap", FILE | 0o644, b"through the link"),
            Entry("sub", FOLDER | 0o755),
        ],
        "src/sub": [Entry("deep.txt", FILE | 0o600, b"deep")],
        "src/same": [Entry("inner.txt", FILE | 0o644, b"inner")],
    })


@contextlib.contextmanager
def sftp_to(tree: Tree) -> Iterator[paramiko.SFTPClient]:
    """An SFTP session with a hostile node serving `tree`, closed with its connection."""
    with hostile_node(tree) as node:
        client = node.client()
        sftp = client.open_sftp()
        try:
            yield sftp
        finally:
            sftp.close()
            client.close()


def files_under(root: Path) -> set[Path]:
    return {path for path in root.rglob("*")}


def test_rsync_down_writes_nothing_outside_the_destination_and_no_special_bit(tmp_path):
    destination = tmp_path / "a" / "b" / "dest"
    destination.mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("mine")
    (destination / "trap").symlink_to(outside)
    before = files_under(tmp_path) - files_under(destination)

    with sftp_to(hostile_tree()) as sftp:
        report = sync_down(sftp, "src", destination)

    assert files_under(tmp_path) - files_under(destination) == before
    assert outside.read_text() == "mine"
    assert not Path("/tmp/absolute.txt").exists()
    assert (destination / "sub" / "deep.txt").read_bytes() == b"deep"
    assert stat.S_IMODE((destination / "sub" / "deep.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE((destination / "setuid.sh").stat().st_mode) == 0o777
    for path in files_under(destination):
        assert not path.lstat().st_mode & SPECIAL_BITS, path
        if path.is_symlink() and path.name != "trap":  # the trap is the user's own link
            assert path.resolve().is_relative_to(destination.resolve()), path
    assert (destination / "link-in").readlink() == Path("sub/deep.txt")
    assert not (destination / "link-out").exists() and not (destination / "link-up").exists()
    refused = "\n".join(report.refused)
    for name in ("'../../escaped.txt'", "'/tmp/absolute.txt'", "'same'",
                 "'link-out'", "'link-up'", "'trap'"):
        assert name in refused, name
    assert len(report.refused) == 6, report.refused


def dump_stream(members: list[tuple[str, int, bytes]]) -> bytes:
    """A node's tar.gz as a hostile head would stream it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, mode, data in members:
            info = tarfile.TarInfo(name)
            info.mode, info.size, info.uid, info.gid = mode, len(data), 0, 0
            info.uname = info.gname = "root"
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("logs/shadow")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        archive.addfile(link)
    return buffer.getvalue()


def test_cluster_dump_keeps_members_in_their_node_folder_private_and_reads_stderr_meanwhile(
    tmp_path,
):
    """8 MB of stderr before the archive stalled the old reader at one channel window."""
    stream = dump_stream([
        ("./logs/raylet.out", 0o644, b"raylet"),
        ("../../../.bashrc", 0o4777, b"evil"),
        ("/etc/cron.d/evil", 0o644, b"evil"),
        ("logs/../../escape", 0o644, b"evil"),
        ("logs/setgid.log", 0o2755, b"log"),
    ])
    output = tmp_path / "dump.tar.gz"
    err = io.StringIO()
    with hostile_node(answer=lambda _command: (stream, b"e" * (8 << 20), 0)) as node:
        client = node.client()
        head = Node("ray-head-1", "head_t", "head", "127.0.0.1", None, "RUNNING")
        connector = SimpleNamespace(
            outputs=SimpleNamespace(nodes=[head], docker_container_name="", stack="s"),
            head=lambda: client, node=lambda _node: client)
        finished: list[object] = []
        worker = threading.Thread(target=lambda: finished.append(
            cluster_dump(connector, output, DumpParts(), err=err)), daemon=True)
        worker.start()
        worker.join(timeout=300)
        client.close()

    assert finished, "cluster-dump finished (it drains stderr while the archive streams)"
    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    with tarfile.open(output) as archive:
        members = {member.name: member for member in archive}
    assert set(members) == {"ray-head-1/logs/raylet.out", "ray-head-1/logs/setgid.log"}
    for member in members.values():
        assert not member.mode & SPECIAL_BITS
        assert (member.uid, member.gid, member.uname) == (os.getuid(), os.getgid(), "")
    shown = err.getvalue()
    for name in ("../../../.bashrc", "/etc/cron.d/evil", "logs/../../escape"):
        assert name in shown


def dump_of(stream: bytes, output: Path, measure: bool = False) -> tuple[str, int]:
    """cluster-dump of one node that streams `stream`: what it said on stderr, and (when
    `measure`) the most memory Python held meanwhile."""
    err = io.StringIO()
    with hostile_node(answer=lambda _command: (stream, b"", 0)) as node:
        client = node.client()
        head = Node("ray-head-1", "head_t", "head", "127.0.0.1", None, "RUNNING")
        connector = SimpleNamespace(
            outputs=SimpleNamespace(nodes=[head], docker_container_name="", stack="s"),
            head=lambda: client, node=lambda _node: client)
        if measure:
            tracemalloc.start()
        try:
            cluster_dump(connector, output, DumpParts(), err=err)
            peak = tracemalloc.get_traced_memory()[1] if measure else 0
        finally:
            tracemalloc.stop()
            client.close()
    return err.getvalue(), peak


def test_a_node_archive_that_breaks_off_keeps_what_came_whole(tmp_path):
    """The node's stream ends inside a member's data: the members before it are in the dump,
    the dump is whole (no short member), and the break is one line."""
    stream = dump_stream([("logs/first.log", 0o644, b"first"),
                          ("logs/big.log", 0o644, os.urandom(1 << 20))])
    output = tmp_path / "dump.tar.gz"
    shown, _ = dump_of(stream[:len(stream) // 2], output)
    with tarfile.open(output) as archive:  # read to its end: it is whole
        names = [member.name for member in archive]
        assert archive.extractfile("ray-head-1/logs/first.log").read() == b"first"
    assert names == ["ray-head-1/logs/first.log"]
    assert "ray-head-1: left out the rest of its archive, which could not be read" in shown
    assert "Traceback" not in shown


def test_a_name_of_many_megabytes_is_refused_before_it_is_read(tmp_path):
    """A pax header (where a long name goes) is read whole into memory by tarfile: one of
    16 MiB, 16 KB once compressed, is refused at its size."""
    stream = dump_stream([("logs/before.log", 0o644, b"kept"),
                          ("logs/" + "n" * (16 << 20), 0o644, b"x"),
                          ("logs/after.log", 0o644, b"not reached")])
    output = tmp_path / "dump.tar.gz"
    shown, peak = dump_of(stream, output, measure=True)
    with tarfile.open(output) as archive:
        assert [member.name for member in archive] == ["ray-head-1/logs/before.log"]
    assert "could not be read (a name or pax header of" in shown
    assert peak < 8 << 20, f"{peak} bytes held for a 16 MiB name"


def test_captured_output_is_bounded_whatever_the_node_floods(tmp_path):
    cap = 64 * 1024
    flood = (b"o" * (16 << 20), b"e" * (16 << 20), 3)
    with hostile_node(answer=lambda _command: flood) as node:
        client = node.client()
        tracemalloc.start()
        try:
            status, out, err = run_captured(client, "ray status", cap=cap)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            client.close()

    assert status == 3
    assert out.endswith("o" * 1000) and len(out) < cap + 100
    assert err.startswith(f"[{(16 << 20) - cap} earlier bytes dropped]")
    assert peak < 8 << 20, f"{peak} bytes held for 32 MB of output"


@pytest.mark.parametrize("name", ["a/b", "", "x\0y", "./"])
def test_a_listed_name_that_is_not_one_file_name_is_refused(tmp_path, name):
    with sftp_to(Tree({"src": [Entry(name, FILE | 0o644, b"x"),
                               Entry("fine.txt", FILE | 0o644, b"ok")]})) as sftp:
        report = sync_down(sftp, "src", tmp_path / "dest")

    assert (tmp_path / "dest" / "fine.txt").read_bytes() == b"ok"
    assert len(report.refused) == 1 and "not a file name" in report.refused[0]


def test_an_sftp_answer_past_paramikos_packet_limit_is_one_line(tmp_path):
    """A listing whose one name is 17 MB: paramiko refuses a packet over 16 MB ("Garbage
    packet received"); the fetch says so in one line, not as a bug."""
    from ops.errors import OpsError

    with sftp_to(Tree({"src": [Entry("n" * (17 << 20), FILE | 0o644, b"x")]})) as sftp, \
            pytest.raises(OpsError, match=r"^fetching over SFTP: the node's answer could not "
                                          r"be read \(Garbage packet received\)"):
        sync_down(sftp, "src", tmp_path / "dest")


def test_a_filter_file_of_many_megabytes_is_read_only_to_its_cap(tmp_path):
    """A node's .gitignore of 8 MB: its first MiB is read (rules past it are not), the rest
    never asked for (the file itself excluded: paramiko's prefetch of a fetched file would
    be measured too)."""
    rules = b"secret.txt\n" + b"#" * (8 << 20) + b"\nkept.txt\n"
    tree = Tree({"src": [Entry(".gitignore", FILE | 0o644, rules),
                         Entry("secret.txt", FILE | 0o644, b"s"),
                         Entry("kept.txt", FILE | 0o644, b"k")]})
    with sftp_to(tree) as sftp:
        tracemalloc.start()
        try:
            sync_down(sftp, "src", tmp_path / "dest", excludes=[".gitignore"],
                      filters=[".gitignore"])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert (tmp_path / "dest" / "kept.txt").read_bytes() == b"k"
    assert not (tmp_path / "dest" / "secret.txt").exists()
    assert peak < 6 << 20, f"{peak} bytes held for an 8 MB filter file"


def test_a_folder_that_becomes_a_link_while_its_file_is_fetched_is_not_followed(tmp_path):
    """The node lists `x/` and `x/id_ed25519`; once `x` is made here, as the node lists it,
    it is swapped for a link to the user's ~/.ssh (a race the node cannot win alone, but
    nothing on the way to a file is ever followed): the user's key is left as it was, the
    file refused by name."""
    keys = tmp_path / "home" / ".ssh"
    keys.mkdir(parents=True)
    (keys / "id_ed25519").write_text("the user's key")
    destination = tmp_path / "dest"

    def swap(path: str) -> None:
        if path == "src/x" and not (destination / "x").is_symlink():
            (destination / "x").rmdir()
            (destination / "x").symlink_to(keys)

    tree = Tree({"src": [Entry("x", stat.S_IFDIR | 0o755)],
                 "src/x": [Entry("id_ed25519", FILE | 0o600, b"from the node")]}, on_serve=swap)
    with sftp_to(tree) as sftp:
        report = sync_down(sftp, "src", destination)
    assert (keys / "id_ed25519").read_text() == "the user's key"
    assert sorted(path.name for path in keys.iterdir()) == ["id_ed25519"]
    assert report.sent == [] and len(report.refused) == 1
    assert "x is a link here" in report.refused[0]
