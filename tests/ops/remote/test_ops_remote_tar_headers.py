"""ops.remote.tar_headers: a node's tar stream read header by header before the local tar sees
it (checksums checked, a long name refused at its size before it is read), and the headers
written here for the local tar, which GNU tar reads as meant."""

from __future__ import annotations

import io
import subprocess
import tarfile

import pytest

from ops.remote.tar_headers import (
    NAME_CAP,
    HeaderReader,
    StreamRefused,
    padded,
    rewritten_header,
)
from tests.support.tools import require_tool


def members_of(stream: bytes) -> list[tuple[str, bytes, int]]:
    view = io.BytesIO(stream)
    reader, found = HeaderReader(view.read), []
    while (member := reader.next()) is not None:
        found.append((member.name, member.kind, member.size))
        view.read(member.data_blocks)
    return found


def archive(*infos: tarfile.TarInfo) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info in infos:
            tar.addfile(info, io.BytesIO(b"d" * info.size))
    return buffer.getvalue()


def named(name: str, size: int = 0, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info


def test_members_are_read_with_their_long_names_and_kinds():
    stream = archive(named("a.txt", 3), named("d/" + "n" * 300, 700),
                     named("link", kind=tarfile.SYMTYPE))
    assert members_of(stream) == [("a.txt", b"0", 3), ("d/" + "n" * 300, b"0", 700),
                                  ("link", b"2", 0)]


def test_a_header_whose_checksum_is_wrong_is_refused():
    stream = bytearray(archive(named("a.txt", 3)))
    stream[0:1] = b"b"
    with pytest.raises(StreamRefused, match="checksum is wrong"):
        members_of(bytes(stream))


def test_a_long_name_over_the_cap_is_refused_before_it_is_read():
    header = rewritten_header("n" * (NAME_CAP + 10), 0o644, 0, 0)[:512]  # its L header alone
    asked: list[int] = []
    view = io.BytesIO(header + b"n" * 100)

    def read_exact(count: int) -> bytes:
        asked.append(count)
        return view.read(count)

    with pytest.raises(StreamRefused, match=f"{NAME_CAP + 11} bytes, over the {NAME_CAP}"):
        HeaderReader(read_exact).next()
    assert asked == [512]


def test_gnu_tar_reads_the_headers_written_here_as_meant(tmp_path):
    names = ["a.txt", "sub/" + "n" * 200, "grüße ☃.txt"]
    stream = b"".join(rewritten_header(name, 0o4755, 5, 1_700_000_000) + b"data!" +
                      bytes(padded(5) - 5) for name in names) + bytes(1024)
    listed = subprocess.run([require_tool("tar"), "-t", "-v", "--full-time", "-f", "-"],
                            input=stream, capture_output=True, check=True).stdout.decode()
    assert [line.split(maxsplit=5)[5] for line in listed.splitlines()] == names
    assert all(line.startswith("-rwsr-xr-x") for line in listed.splitlines())  # as given
    assert members_of(stream) == [(name, b"0", 5) for name in names]
