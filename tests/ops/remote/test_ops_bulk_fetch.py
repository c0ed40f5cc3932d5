"""`invoke rsync-down` every way it fetches: as one tar stream over the system's OpenSSH
(ops.remote.tar_fetch, the default when ssh is installed) unpacked by the local GNU tar, or by
Python's tarfile where the local tar is not GNU's, and over paramiko's SFTP (the fallback,
forced here with RAY_GCP_SYNC=sftp, and taken for a head without GNU tar and find). Every way:
rsync_exclude and the node's .gitignore files are honoured, unchanged files are skipped by
size and mtime, modes (without special bits) and mtimes are kept, a link inside its folder is
made again and one leading out is left out, a link here is not written through, odd names
arrive as themselves, a missing source is one line, and a host key other than the pinned one
stops the fetch. The stream also: one ssh run, a file gone before the pack is left out with
the node's word for it, and a hostile node's listing and archive (its `find` and `tar` lie)
land nothing outside the destination, either local unpacker."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import threading
from pathlib import Path

import pytest

from tests.support.sshd_server import LocalSshd, keygen
from tests.support.sync_shims import logging_ssh, logging_tar
from tests.support.tools import require_tool

WAYS = {"tar": {}, "tarfile": {}, "sftp": {"RAY_GCP_SYNC": "sftp"}}
"""tar: the local GNU tar unpacks the node's stream; tarfile: the tar on PATH is not GNU's
(as on a Mac), so Python's tarfile reads it; sftp: paramiko's SFTP."""
SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


def logged(stack, tmp_path: Path, extra: dict[str, str] | None = None):
    stack.ssh_log = tmp_path / "ssh-runs.log"
    logging_ssh(tmp_path / "shims", stack.ssh_log)
    stack.env = {**stack.env, **(extra or {}),
                 "PATH": f"{tmp_path / 'shims'}{os.pathsep}{stack.env['PATH']}"}
    return stack


@pytest.fixture(params=sorted(WAYS))
def way(request, stack, tmp_path):
    """The stack, fetching the parametrised way; `ssh` notes each run in `stack.ssh_log`,
    the local `tar` each in `stack.tar_log`."""
    logged(stack, tmp_path, WAYS[request.param])
    stack.tar_log = tmp_path / "tar-runs.log"
    logging_tar(tmp_path / "shims", stack.tar_log, gnu=request.param != "tarfile")
    stack.way = request.param
    return stack


def fetch(stack, source: Path | str, target: Path) -> str:
    result = stack.invoke("rsync-down", str(source), str(target))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def test_unchanged_files_are_skipped_by_size_and_mtime(way, tmp_path):
    remote, local = tmp_path / "remote", tmp_path / "local"
    (remote / "sub").mkdir(parents=True)
    (remote / "a.txt").write_text("alpha\n")
    (remote / "sub" / "b.txt").write_text("beta\n")
    assert "2 file(s) sent, 0 unchanged" in fetch(way, remote, local)
    unpacked = way.tar_log.read_text() if way.tar_log.exists() else ""
    assert "0 file(s) sent, 2 unchanged" in fetch(way, remote, local)
    assert (way.tar_log.read_text() if way.tar_log.exists() else "") == unpacked, \
        "nothing to fetch: no stream"
    os.utime(remote / "a.txt", (1_600_000_000, 1_600_000_000))  # same bytes, older mtime
    (remote / "sub" / "b.txt").write_text("beta, longer\n")
    assert "2 file(s) sent, 0 unchanged" in fetch(way, remote, local)
    assert int((local / "a.txt").stat().st_mtime) == 1_600_000_000
    assert (local / "sub" / "b.txt").read_text() == "beta, longer\n"
    assert way.ssh_log.exists() == (way.way != "sftp")  # the way it said it went
    assert way.tar_log.exists() == (way.way == "tar")


def test_excludes_and_the_nodes_gitignore_files_are_honoured(way, tmp_path):
    remote, local = tmp_path / "remote", tmp_path / "local"
    files = {".gitignore": "*.log\n", "keep.py": "k", "app.log": "l", "pkg/.git/HEAD": "ref",
             "pkg/mod.pyc": "c", "build/out.bin": "b", "sub/.gitignore": "secret.txt\n",
             "sub/secret.txt": "s", "sub/kept.txt": "t", "other/secret.txt": "o"}
    for relative, text in files.items():
        (remote / relative).parent.mkdir(parents=True, exist_ok=True)
        (remote / relative).write_text(text)
    fetch(way, remote, local)
    assert sorted(path.relative_to(local).as_posix() for path in local.rglob("*")
                  if path.is_file()) == [".gitignore", "keep.py", "other/secret.txt",
                                         "sub/.gitignore", "sub/kept.txt"]


def test_modes_without_special_bits_and_mtimes_are_kept(way, tmp_path):
    remote, local = tmp_path / "remote", tmp_path / "local"
    remote.mkdir()
    (remote / "run.sh").write_text("#!/bin/sh\n")
    (remote / "run.sh").chmod(0o4750)
    (remote / "notes.txt").write_text("n\n")
    (remote / "notes.txt").chmod(0o600)
    os.utime(remote / "notes.txt", (1_500_000_000, 1_500_000_000))
    fetch(way, remote, local)
    assert stat.S_IMODE((local / "run.sh").stat().st_mode) == 0o750
    assert stat.S_IMODE((local / "notes.txt").stat().st_mode) == 0o600
    assert int((local / "notes.txt").stat().st_mtime) == 1_500_000_000


def test_links_inside_are_made_again_and_a_local_link_or_folder_is_not_written(way,
                                                                              tmp_path):
    remote, local, mine = tmp_path / "remote", tmp_path / "local", tmp_path / "mine.txt"
    (remote / "sub").mkdir(parents=True)
    (remote / "sub" / "deep.txt").write_text("deep\n")
    (remote / "inside").symlink_to("sub/deep.txt")
    (remote / "outside").symlink_to(mine)
    (remote / "trap").write_text("through the link\n")
    mine.write_text("mine\n")
    (remote / "folder-here").write_text("over a folder\n")
    local.mkdir()
    (local / "trap").symlink_to(mine)
    (local / "folder-here").mkdir()
    result = way.invoke("rsync-down", str(remote), str(local))
    assert result.returncode == 0, result.stderr
    assert (local / "inside").readlink() == Path("sub/deep.txt")
    assert not (local / "outside").exists() and not (local / "outside").is_symlink()
    assert mine.read_text() == "mine\n" and (local / "folder-here").is_dir()
    assert "3 left out" in result.stdout
    for name in ("outside", "trap", "folder-here"):
        assert f"left out '{name}'" in result.stderr, name


def test_odd_names_arrive_as_themselves_and_are_skipped_when_unchanged(way, tmp_path):
    """Blanks, a line break, a leading dash, non-ASCII, a name like the answers' end."""
    remote, local = tmp_path / "remote", tmp_path / "local"
    names = ["two words.txt", "line\nbreak.txt", "-leading-dash", "Grüße ☃.txt", "Z\n"]
    (remote / "sub folder").mkdir(parents=True)
    for name in names:
        (remote / "sub folder" / name).write_text(name)
    (remote / "Z\n").symlink_to("sub folder")
    assert f"{len(names)} file(s) sent" in fetch(way, remote, local)
    assert sorted(path.name for path in (local / "sub folder").iterdir()) == sorted(names)
    assert all((local / "sub folder" / name).read_text() == name for name in names)
    assert (local / "Z\n").readlink() == Path("sub folder")
    assert f"0 file(s) sent, {len(names)} unchanged" in fetch(way, remote, local)


def test_a_single_file_lands_in_a_folder_or_as_the_name_given(way, tmp_path):
    remote = tmp_path / "remote" / "weights.bin"
    remote.parent.mkdir()
    remote.write_bytes(os.urandom(3 * (1 << 20) + 12345))  # several reads of the stream
    (tmp_path / "into").mkdir()
    assert "1 file(s) sent" in fetch(way, remote, tmp_path / "into")
    assert (tmp_path / "into" / "weights.bin").read_bytes() == remote.read_bytes()
    assert "1 file(s) sent" in fetch(way, remote, tmp_path / "renamed.bin")
    assert (tmp_path / "renamed.bin").read_bytes() == remote.read_bytes()
    assert "0 file(s) sent, 1 unchanged" in fetch(way, remote, tmp_path / "renamed.bin")


def test_files_hard_linked_on_the_node_both_arrive_whole(way, tmp_path):
    """Only plain files are taken from the stream: the node's tar sends the second name of a
    hard link whole too, not as a link to the first."""
    remote, local = tmp_path / "remote", tmp_path / "local"
    remote.mkdir()
    (remote / "a.txt").write_text("shared\n")
    os.link(remote / "a.txt", remote / "b.txt")
    assert "2 file(s) sent" in fetch(way, remote, local)
    assert (local / "a.txt").read_text() == (local / "b.txt").read_text() == "shared\n"
    assert (local / "b.txt").stat().st_nlink == 1


def test_a_source_that_is_not_there_is_one_line(way, tmp_path):
    result = way.invoke("rsync-down", str(tmp_path / "nothing-here"), str(tmp_path / "local"))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: remote {tmp_path / 'nothing-here'} does not exist: nothing to fetch"]


def test_a_host_key_other_than_the_pinned_one_stops_the_fetch(way, sshd, tmp_path):
    known_hosts = way.state_dir / way.name / "known_hosts"
    other = keygen(tmp_path / "other_host_key")
    kind, blob = Path(f"{other}.pub").read_text().split()[:2]
    known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {kind} {blob}\n")
    remote = tmp_path / "remote.txt"
    remote.write_text("must not arrive\n")
    result = way.invoke("rsync-down", str(remote), str(tmp_path / "local.txt"))
    assert result.returncode != 0
    assert "pinned" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "local.txt").exists()


def test_a_fetch_is_one_ssh_run(stack, tmp_path):
    remote, local = tmp_path / "remote", tmp_path / "local"
    (remote / "sub").mkdir(parents=True)
    (remote / "sub" / "a.txt").write_text("a\n")
    (remote / ".gitignore").write_text("*.log\n")  # read in the same run
    logged(stack, tmp_path)
    assert "2 file(s) sent" in fetch(stack, remote, local)
    assert stack.ssh_log.read_text().count("run") == 1


def node_with_tools(local_sshd: type[LocalSshd], tmp_path: Path, monkeypatch,
                    tools: dict[str, str], links: list[str]):
    """A stack on an sshd of its own whose sessions' PATH holds only `tools` (name -> sh
    script) and `links` (the system's programs of those names)."""
    from tests.support.sshd_fixture import make_stack

    folder = tmp_path / "node-bin"
    folder.mkdir()
    for program in links:
        (folder / program).symlink_to(require_tool(program))
    for program, script in tools.items():
        (folder / program).write_text(f"#!/bin/sh\n{script}\n")
        (folder / program).chmod(0o755)
    server_dir = tmp_path / "sshd"
    server_dir.mkdir()
    server = local_sshd(server_dir, set_env={"PATH": str(folder)})
    return server, lambda: logged(make_stack(server, tmp_path, monkeypatch, pin=True), tmp_path)


NODE_BASICS = ["head", "xargs", "sh", "base64", "stat", "mkdir"]


@pytest.mark.parametrize("missing", ["tar", "find"])
def test_a_head_without_gnu_tar_or_find_is_fetched_from_over_sftp(local_sshd, missing, tmp_path,
                                                                   monkeypatch):
    links = [*NODE_BASICS, *({"tar", "find"} - {missing})]
    server, make = node_with_tools(local_sshd, tmp_path, monkeypatch, {}, links)
    remote, local = tmp_path / "remote", tmp_path / "local"
    remote.mkdir()
    (remote / "a.txt").write_text("a\n")
    with server:
        stack = make()
        assert "1 file(s) sent" in fetch(stack, remote, local)
    assert stack.ssh_log.read_text().count("run") == 1  # asked, refused, then SFTP
    assert (local / "a.txt").read_text() == "a\n"


def test_a_file_gone_before_the_pack_is_left_out_with_the_nodes_word(local_sshd, tmp_path,
                                                                      monkeypatch):
    """The node's tar removes one listed file first, as a job that deletes it meanwhile
    would; GNU tar says so and goes on with the rest."""
    remote, local = tmp_path / "remote", tmp_path / "local"
    remote.mkdir()
    (remote / "gone.txt").write_text("g\n")
    (remote / "kept.txt").write_text("k\n")
    racing_tar = (f'case "$*" in *" -c "*|-c*) rm -f "{remote}/gone.txt" ;; esac\n'
                  f'exec "{require_tool("tar")}" "$@"')
    server, make = node_with_tools(local_sshd, tmp_path, monkeypatch, {"tar": racing_tar},
                                   [*NODE_BASICS, "find", "rm"])
    with server:
        result = make().invoke("rsync-down", str(remote), str(local))
    assert result.returncode == 0, result.stderr
    assert "1 file(s) sent, 0 unchanged, 1 left out" in result.stdout
    assert "left out 'gone.txt': Cannot stat: No such file or directory" in result.stderr
    assert (local / "kept.txt").read_text() == "k\n" and not (local / "gone.txt").exists()


def hostile_archive(outside: Path) -> bytes:
    """What a node whose tar lies sends for the names it was asked; `outside` is a folder
    outside the destination that two links and the files after them aim at."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        def add(name: str, data: bytes = b"", mode: int = 0o644,
                kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.type, info.linkname = len(data), mode, kind, link
            archive.addfile(info, io.BytesIO(data))

        add("../escaped.txt", b"escaped")
        add("/tmp/ray-gcp-absolute.txt", b"absolute")
        add("unasked.txt", b"unasked")
        add("setuid.sh", b"#!/bin/sh\n", mode=0o6777)
        add("asked-link", kind=tarfile.SYMTYPE, link="/etc/passwd")
        add("sub/deep.txt", b"deep")
        add("sub/deep.txt", b"twice")
        add("trap", b"through the link")
        add("escape", kind=tarfile.SYMTYPE, link=str(outside))  # then a file through it
        add("escape/pwned.txt", b"pwned")
        add("up", kind=tarfile.SYMTYPE, link="../../../../../../../../" + str(outside))
        add("up/pwned-too.txt", b"pwned")
        add("hard", kind=tarfile.LNKTYPE, link=str(outside / "mine.txt"))
    return buffer.getvalue()


def fetch_from_a_lying_node(local_sshd: type[LocalSshd], tmp_path: Path, monkeypatch,
                            records: list[tuple[str, str, str, str]],
                            archive: bytes, destination: Path, gnu_here: bool):
    """`rsync-down /anywhere` from a node whose `find` prints `records` (type, mode, path, link
    target) whatever it is asked and whose `tar` sends `archive` whatever names it is given;
    unpacked here by GNU tar when `gnu_here`, else by Python's tarfile."""
    listing = tmp_path / "listing"
    listing.write_bytes(b"".join(f"{kind} {mode} 1 1700000000.5 {path}\0L{target}\0".encode()
                                 for kind, mode, path, target in records))
    (tmp_path / "lying.tar").write_bytes(archive)
    tools = {
        "find": f'case "$1" in --version) echo "find (GNU findutils) 4.9.0" ;;'
                f' *) cat "{listing}" ;; esac',
        "tar": f'case "$1" in --version) echo "tar (GNU tar) 1.34" ;;'
               f' *) cat > /dev/null; cat "{tmp_path / "lying.tar"}" ;; esac',
    }
    server, make = node_with_tools(local_sshd, tmp_path, monkeypatch, tools, [*NODE_BASICS, "cat"])
    with server:
        stack = make()
        logging_tar(tmp_path / "shims", tmp_path / "tar-runs.log", gnu=gnu_here)
        return stack.invoke("rsync-down", "/anywhere", str(destination))


HOSTILE_LISTING = [  # find's records as a lying node prints them
    ("d", "755", "", ""), ("f", "4777", "setuid.sh", ""), ("f", "644", "asked-link", ""),
    ("d", "755", "sub", ""), ("f", "644", "sub/deep.txt", ""), ("f", "644", "trap", ""),
    ("f", "644", "../../escaped-too.txt", ""), ("f", "644", "nowhere/x.txt", ""),
    ("f", "644", "sub/deep.txt", ""), ("l", "777", "link-out", "/etc/passwd"),
    ("l", "777", "link-up", "../../outside"), ("l", "777", "link-in", "sub/deep.txt"),
    ("p", "644", "fifo", ""),
]


@pytest.mark.parametrize("local_tar", ["GNU's", "not GNU's"])
def test_a_hostile_nodes_listing_and_archive_land_nothing_outside(local_sshd, local_tar, tmp_path,
                                                                  monkeypatch):
    """Unpacked here by GNU tar (given only the names asked for) or, where the local tar
    is not GNU's, by Python's tarfile (which names each member it refuses)."""
    destination = tmp_path / "a" / "b" / "dest"
    destination.mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("mine")
    (destination / "trap").symlink_to(outside)
    aimed_at = tmp_path / "aimed-at"
    aimed_at.mkdir()
    (aimed_at / "mine.txt").write_text("mine")
    result = fetch_from_a_lying_node(local_sshd, tmp_path, monkeypatch, HOSTILE_LISTING,
                                     hostile_archive(aimed_at), destination,
                                     gnu_here=local_tar == "GNU's")
    assert result.returncode == 0, result.stderr
    # `../x`, `../../x` and `link-up` aim at the destination's folders: they hold it alone
    assert set((tmp_path / "a").rglob("*")) - set(destination.rglob("*")) == {
        tmp_path / "a" / "b", destination}
    assert outside.read_text() == "mine"
    assert sorted(path.name for path in aimed_at.iterdir()) == ["mine.txt"]
    assert (aimed_at / "mine.txt").read_text() == "mine"
    assert (aimed_at / "mine.txt").stat().st_nlink == 1
    assert not Path("/tmp/ray-gcp-absolute.txt").exists()
    assert (destination / "sub" / "deep.txt").read_bytes() in (b"deep", b"twice")  # its pick
    assert stat.S_IMODE((destination / "setuid.sh").stat().st_mode) == 0o777
    assert (destination / "link-in").readlink() == Path("sub/deep.txt")
    for path in destination.rglob("*"):
        assert not path.lstat().st_mode & SPECIAL_BITS, path
        if path.is_symlink() and path.name != "trap":  # the trap is the user's own link
            assert path.resolve().is_relative_to(destination.resolve()), path
    left_out = [line.removeprefix("rsync-down: left out ") for line in
                result.stderr.splitlines() if line.startswith("rsync-down: left out ")]
    named = ["'../../escaped-too.txt'", "'nowhere/x.txt'", "'sub/deep.txt'", "'link-out'",
             "'link-up'", "'fifo'", "'asked-link'", "'trap'",  # the listing's, the asked's
             # the members not asked for (`trap` was not), or sent twice: read here first,
             # whichever tar unpacks
             "'../escaped.txt'", "'/tmp/ray-gcp-absolute.txt'", "'unasked.txt'",
             "'sub/deep.txt'", "'trap'", "'escape'", "'escape/pwned.txt'", "'up'",
             "'up/pwned-too.txt'", "'hard'"]
    assert sorted(line.split(":")[0] for line in left_out) == sorted(named)
    assert not list(destination.glob(".ray-gcp-fetch-*")), "the unpacking folder is gone"
    assert "listed twice" in result.stderr and "it is a fifo" in result.stderr
    assert "not inside a folder the node listed" in result.stderr


def test_without_splice_the_relay_carries_the_stream_whole():
    """Where the kernel has no splice (not Linux), the stream is read and written instead:
    3 MB from one pipe to another, more than either holds, with a reader on the far end."""
    from ops.remote.tar_unpack import _read_and_write

    source_read, source_write = os.pipe()
    target_read, target_write = os.pipe()
    data = os.urandom(3 << 20)
    received = bytearray()

    def read_all() -> None:
        while chunk := os.read(target_read, 65536):
            received.extend(chunk)

    threads = [threading.Thread(target=lambda: (os.write(source_write, data),
                                                os.close(source_write))),
               threading.Thread(target=read_all)]
    for thread in threads:
        thread.start()
    moved = 0
    while count := _read_and_write(source_read, target_write, 1 << 20):
        moved += count
    os.close(target_write)
    for thread in threads:
        thread.join()
    os.close(source_read)
    os.close(target_read)
    assert moved == len(data) and bytes(received) == data


def lying_archive(members: list[tuple[str, bytes, bytes, str, int]], cut: int = 0) -> bytes:
    """A tar of (name, kind, data, link target, mode) members, less its last `cut` bytes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for name, kind, data, link, mode in members:
            info = tarfile.TarInfo(name)
            info.type, info.size, info.linkname, info.mode = kind, len(data), link, mode
            info.mtime = 1_700_000_000
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()[:len(buffer.getvalue()) - cut]


BOTH_TARS = pytest.mark.parametrize("local_tar", ["GNU's", "not GNU's"])


@BOTH_TARS
def test_a_listed_folder_that_arrives_as_a_link_moves_nothing_of_yours(local_sshd, local_tar,
                                                                       tmp_path, monkeypatch):
    """The node lists `x/` and `x/id_ed25519`, then its tar makes `x` a link to the user's
    ~/.ssh before (and after) the file under it: the user's key stays where it is."""
    ssh_folder = tmp_path / "home" / ".ssh"
    ssh_folder.mkdir(parents=True)
    (ssh_folder / "id_ed25519").write_text("the user's key")
    link = (str(ssh_folder), tarfile.SYMTYPE, b"", 0o777)
    archive = lying_archive([("x", link[1], b"", link[0], 0o777),
                             ("x/id_ed25519", tarfile.REGTYPE, b"from the node", "", 0o600),
                             ("x", link[1], b"", link[0], 0o777)])
    destination = tmp_path / "dest"
    result = fetch_from_a_lying_node(
        local_sshd, tmp_path, monkeypatch, [("d", "755", "", ""), ("d", "755", "x", ""),
                                ("f", "600", "x/id_ed25519", "")],
        archive, destination, gnu_here=local_tar == "GNU's")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert (ssh_folder / "id_ed25519").read_text() == "the user's key"
    assert (destination / "x").is_dir() and not (destination / "x").is_symlink()
    assert (destination / "x" / "id_ed25519").read_text() == "from the node"
    assert "left out 'x': the node sent" in result.stderr
    assert not list(destination.glob(".ray-gcp-fetch-*"))


@BOTH_TARS
def test_a_member_the_listing_did_not_promise_never_hangs_the_fetch(local_sshd, local_tar, tmp_path,
                                                                   monkeypatch):
    """A folder arrives as a link (an empty stand-in under GNU tar) with a file under it, then
    names enough to fill any pipe: the fetch ends, with what was asked for."""
    members = [("x", tarfile.SYMTYPE, b"", "/nowhere", 0o777),
               ("x/a.txt", tarfile.REGTYPE, b"a", "", 0o644),
               *((f"unasked-{index:05d}-{'n' * 60}", tarfile.REGTYPE, b"", "", 0o644)
                 for index in range(3000))]
    destination = tmp_path / "dest"
    result = fetch_from_a_lying_node(
        local_sshd, tmp_path, monkeypatch, [("d", "755", "", ""), ("d", "755", "x", ""),
                                ("f", "644", "x/a.txt", "")],
        lying_archive(members), destination, gnu_here=local_tar == "GNU's")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert (destination / "x" / "a.txt").read_text() == "a"
    assert "left out 'x': the node sent" in result.stderr


@BOTH_TARS
def test_a_file_the_stream_breaks_off_in_is_never_placed(local_sshd, local_tar, tmp_path,
                                                         monkeypatch):
    """The stream ends inside the second file's data: the first (whole) may land, the second
    never does, and the break is one line."""
    archive = lying_archive([("whole.txt", tarfile.REGTYPE, b"w" * 1000, "", 0o644),
                             ("cut.sh", tarfile.REGTYPE, b"c" * 100_000, "", 0o6755)],
                            cut=60_000)
    destination = tmp_path / "dest"
    result = fetch_from_a_lying_node(
        local_sshd, tmp_path, monkeypatch, [("d", "755", "", ""), ("f", "644", "whole.txt", ""),
                                ("f", "755", "cut.sh", "")],
        archive, destination, gnu_here=local_tar == "GNU's")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (destination / "cut.sh").exists()
    assert not list(destination.glob(".ray-gcp-fetch-*"))


@BOTH_TARS
def test_a_name_of_many_megabytes_is_refused_in_one_line_by_either_tar(local_sshd, local_tar,
                                                                       tmp_path, monkeypatch):
    """A long-name header of 16 MiB from a lying node is refused at its size, before it is
    read, whichever tar unpacks here (GNU tar would hold it whole in memory too)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        info = tarfile.TarInfo("n" * (16 << 20))
        archive.addfile(info, io.BytesIO(b""))
    result = fetch_from_a_lying_node(local_sshd, tmp_path, monkeypatch, [("d", "755", "", ""),
                                                             ("f", "644", "a.txt", "")],
                                     buffer.getvalue(), tmp_path / "dest",
                                     gnu_here=local_tar == "GNU's")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "could not be read (a name or pax header of 16777217 bytes" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@BOTH_TARS
def test_a_folder_and_a_link_the_node_sends_never_change_a_mode_outside(local_sshd, local_tar,
                                                                        tmp_path, monkeypatch):
    """An unwritable folder with a link inside, aimed at a file of the user's: the cleanup of
    what was unpacked here (TemporaryDirectory's chmodded through links before Python
    3.11.8, CVE-2023-6597) leaves the user's file as it was."""
    mine = tmp_path / "mine.txt"
    mine.write_text("mine")
    mine.chmod(0o444)
    archive = lying_archive([("d", tarfile.DIRTYPE, b"", "", 0o555),
                             ("d/l", tarfile.SYMTYPE, b"", str(mine), 0o777),
                             ("d/a.txt", tarfile.REGTYPE, b"a", "", 0o644)])
    destination = tmp_path / "dest"
    result = fetch_from_a_lying_node(
        local_sshd, tmp_path, monkeypatch, [("d", "755", "", ""), ("d", "755", "d", ""),
                                ("f", "644", "d/a.txt", ""), ("f", "644", "d/l", "")],
        archive, destination, gnu_here=local_tar == "GNU's")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert stat.S_IMODE(mine.stat().st_mode) == 0o444 and mine.read_text() == "mine"
    assert (destination / "d" / "a.txt").read_text() == "a"
    assert not (destination / "d" / "l").exists() and not (destination / "d" / "l").is_symlink()
    assert not list(destination.glob(".ray-gcp-fetch-*"))


@BOTH_TARS
def test_endless_members_not_asked_for_end_the_fetch_in_one_line(local_sshd, local_tar, tmp_path,
                                                                monkeypatch):
    """Every member left out is named, so a node sending members nobody asked for without end
    would grow that list without end: past 10,000 the stream is refused in one line."""
    members = [(f"unasked-{index}", tarfile.REGTYPE, b"", "", 0o644) for index in range(10_001)]
    result = fetch_from_a_lying_node(
        local_sshd, tmp_path, monkeypatch, [("d", "755", "", ""), ("f", "644", "a.txt", "")],
        lying_archive(members), tmp_path / "dest", gnu_here=local_tar == "GNU's")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "could not be read (over 10000 members that could not be taken)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr[:2000]
