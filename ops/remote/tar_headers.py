"""A node's tar stream read header by header, here, before anything of it reaches the local
tar (ops.remote.tar_unpack): every header's checksum checked, a long name bounded
(NAME_CAP) before it is read, each member's size, mode, mtime and kind read as GNU tar reads
them, so the local tar is given only members re-written from what was read here (a regular
file, its name, a mode without special bits, its size and mtime), never the node's own
headers. What the stream holds that cannot be read on (a bad checksum, a name or pax header
over the cap, a sparse member, a size that is not a number) is a StreamRefused: one line.

The node's tar is asked for `--format=gnu` (tar_session's `pack`): an honest stream holds
regular files, each after a GNU long-name header (`L`) when its name is over 100 bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ops.remote.untrusted import EXTENDED_HEADER_CAP as NAME_CAP

BLOCK = 512
NAME_FIELD = 100  # bytes of a header's own name field
OCTAL_11 = 8 ** 11  # the first number 11 octal digits cannot hold
FILE_KINDS = {b"0", b"\0", b"7"}  # a regular file, as GNU tar and Python's tarfile read them
_NAME_HEADERS = {b"L", b"K"}  # GNU long name / long link target: for the member after
_PAX_HEADERS = {b"x", b"g", b"X"}
_NO_DATA = {b"1", b"2", b"3", b"4", b"5", b"6"}  # links, devices, folders, fifos: no data
_REFUSED_KINDS = {b"S": "a sparse member", b"M": "a multi-volume member",
                  b"V": "a volume label", b"N": "an old GNU long-name member"}
KIND_WORDS = {b"1": "a hard link", b"2": "a link", b"3": "a character device",
              b"4": "a block device", b"5": "a folder", b"6": "a fifo"}


class StreamRefused(Exception):
    """The stream cannot be read on (said in one line, the node named by the caller)."""


@dataclass(frozen=True)
class Member:
    """One member as read: its name (the long name when one came before it), kind, mode,
    size (the data that follows, padded to BLOCK), mtime, and whether a pax header came
    before it (whose fields are not read here)."""

    name: str
    kind: bytes
    mode: int
    size: int
    mtime: int
    after_pax: bool

    @property
    def is_file(self) -> bool:
        return self.kind in FILE_KINDS

    @property
    def data_blocks(self) -> int:
        """Bytes of data (padded) that follow the header in the stream."""
        return 0 if self.kind in _NO_DATA else padded(self.size)


def padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


class HeaderReader:
    """Members of the stream `read_exact(count)` returns (fewer bytes only at its end); the
    caller reads or skips each member's `data_blocks` before asking for the next."""

    def __init__(self, read_exact: Callable[[int], bytes]) -> None:
        self.read_exact = read_exact

    def next(self) -> Member | None:
        """The next member, or None at the archive's end (a zero block, or the stream's end
        between members)."""
        long_name: bytes | None = None
        after_pax = False
        while True:
            block = self.read_exact(BLOCK)
            if not block or block == bytes(BLOCK):
                return None
            if len(block) < BLOCK:
                raise StreamRefused("it ends inside a header")
            kind, size = _checked(block)
            if kind in _NAME_HEADERS or kind in _PAX_HEADERS:
                if size > NAME_CAP:
                    raise StreamRefused(f"a name or pax header of {size} bytes, over the "
                                        f"{NAME_CAP} bytes one may take")
                data = self.read_exact(padded(size))
                if len(data) < padded(size):
                    raise StreamRefused("it ends inside a header")
                if kind == b"L":
                    long_name = data[:size].split(b"\0", 1)[0]
                after_pax = after_pax or kind in (b"x", b"X")
                continue
            if kind in _REFUSED_KINDS:
                raise StreamRefused(f"it holds {_REFUSED_KINDS[kind]}, which was not asked for")
            name = long_name if long_name is not None else _name(block)
            return Member(name.decode(errors="surrogateescape"), kind,
                          _number(block[100:108]), size, _number(block[136:148]), after_pax)


def rewritten_header(name: str, mode: int, size: int, mtime: int) -> bytes:
    """The GNU header (a long-name one first when the name needs it) of a regular file, as the
    local tar is given it; built here directly (tarfile's own takes three times as long)."""
    raw = name.encode(errors="surrogateescape")
    long_name = b""
    if len(raw) > NAME_FIELD:
        data = raw + b"\0"
        long_name = _header(b"././@LongLink", b"L", 0, len(data), 0) + data + bytes(
            padded(len(data)) - len(data))
        raw = raw[:NAME_FIELD]
    return long_name + _header(raw, b"0", mode, size, mtime)


def _header(name: bytes, kind: bytes, mode: int, size: int, mtime: int) -> bytes:
    block = bytearray(BLOCK)
    block[0:len(name)] = name
    block[100:108] = b"%07o\0" % (mode & 0o7777)
    block[108:116] = b"0000000\0"
    block[116:124] = b"0000000\0"
    block[124:136] = _size_field(size)
    block[136:148] = b"%011o\0" % min(max(mtime, 0), OCTAL_11 - 1)
    block[148:156] = b" " * 8
    block[156:157] = kind
    block[257:265] = b"ustar  \0"  # GNU's magic and version
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def _size_field(size: int) -> bytes:
    """12 bytes: octal, or GNU's base-256 past 8 GiB."""
    if size < OCTAL_11:
        return b"%011o\0" % size
    return b"\x80" + size.to_bytes(11, "big")


def _checked(block: bytes) -> tuple[bytes, int]:
    """(kind, size) of a header whose checksum is right, as GNU tar checks it (the sum of its
    bytes, the checksum field as blanks, unsigned or signed)."""
    try:
        stored = _number(block[148:156])
    except StreamRefused:
        raise StreamRefused("a header with no checksum: it is not a tar") from None
    unsigned = sum(block[:148]) + 8 * 32 + sum(block[156:])
    if stored != unsigned:  # some old tars summed signed bytes: GNU tar takes either
        high = sum(1 for byte in block[:148] + block[156:] if byte >= 128)
        if stored != unsigned - 256 * high:
            raise StreamRefused("a header whose checksum is wrong: it is not a tar")
    size = _number(block[124:136])
    if size < 0:
        raise StreamRefused(f"a member of {size} bytes")
    return block[156:157], size


def _name(block: bytes) -> bytes:
    """The name field, with the POSIX prefix before it (GNU's own format has none there)."""
    name = block[:100].split(b"\0", 1)[0]
    if block[257:263] == b"ustar\0":
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            return prefix + b"/" + name
    return name


def _number(field: bytes) -> int:
    """An octal field, or GNU's base-256 (its first byte's top bit set)."""
    if field and field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * (len(field) - 1))) if field[0] == 0xFF else value
    digits = field.split(b"\0", 1)[0].strip(b" ")
    try:
        return int(digits or b"0", 8)
    except ValueError:
        raise StreamRefused(f"a header field {field!r} that is not a number") from None
