"""What a node sends is data, never instructions: names, modes and output checked here.

A Ray job runs as the SSH user, who has passwordless sudo, so one bad job owns the head: its
SFTP listings, its tar streams and its command output may be made to hurt the laptop. The
syncs (sync.py, tar_fetch.py, landing.py), cluster-dump (ops/cloud/cluster_dump.py) and
captured commands (commands.py) pass everything they take from a node through these
functions:
- a name is one path component (no `/`, not `.`/`..`, no NUL); a path inside an archive is
  made relative and may not climb out (`..`), else the entry is refused with one message and
  the rest goes on;
- a mode keeps its permission bits only: never setuid, setgid or sticky; nothing is chowned;
- output is read to its end but only its last `cap` bytes are kept (the channel is drained, so
  the remote never blocks on a full window, and memory stays bounded);
- an SFTP answer paramiko cannot read ends the transfer in one line (sftp_answers);
- an archive is read with CappedHeaders: a long-name or pax header (which tarfile holds whole
  in memory) past EXTENDED_HEADER_CAP ends the reading, so no name can take gigabytes here.
"""

from __future__ import annotations

import contextlib
import posixpath
import stat
import tarfile
import threading
from collections.abc import Callable, Iterator

from ops.errors import OpsError

OUTPUT_CAP = 1024 * 1024  # bytes kept of one captured stream
EXTENDED_HEADER_CAP = 1024 * 1024  # bytes of one long-name or pax header (a name is < 4 KiB)
FILTER_CAP = 1024 * 1024  # bytes read of one filter file (a .gitignore) a node holds
_EXTENDED = {tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE,
             tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE}
_CHUNK = 32768


class RefusedEntry(ValueError):
    """An entry from a node that would land outside the destination (or is unreadable)."""


def check_entry_name(name: str) -> str:
    """One component of a remote listing, as given; RefusedEntry when it is not one."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise RefusedEntry(f"{name!r} is not a file name")
    return name


def member_path(name: str) -> str:
    """An archive member's path made relative (`./x` -> `x`); RefusedEntry when it is
    absolute or climbs out (`..`) of where it is unpacked."""
    if "\0" in name or name.startswith("/"):
        raise RefusedEntry(f"{name!r} is an absolute path")
    normal = posixpath.normpath(name)
    if normal == ".." or normal.startswith("../"):
        raise RefusedEntry(f"{name!r} leaves the destination")
    return "" if normal == "." else normal


def link_stays_inside(directory: str, target: str) -> bool:
    """Whether a relative symlink in `directory` (relative to the destination) pointing at
    `target` resolves inside the destination; an absolute target never does."""
    if target.startswith("/") or "\0" in target:
        return False
    try:
        member_path(posixpath.join(directory, target))
    except RefusedEntry:
        return False
    return True


def safe_mode(mode: int | None, default: int = 0o644) -> int:
    """The permission bits of a remote mode, without setuid, setgid and sticky."""
    return stat.S_IMODE(mode) & 0o777 if mode is not None else default


class CappedHeaders(tarfile.TarInfo):
    """An archive member from a node (`tarfile.open(..., tarinfo=CappedHeaders)`): tarfile
    reads a long-name or pax header whole into memory, so one past EXTENDED_HEADER_CAP is
    refused before it is read, and the archive's reading ends there (tarfile.ReadError)."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:  # tarfile's hook
        if self.type in _EXTENDED and self.size > EXTENDED_HEADER_CAP:
            raise tarfile.SubsequentHeaderError(
                f"a name or pax header of {self.size} bytes, over the "
                f"{EXTENDED_HEADER_CAP} bytes one may take")
        return super()._proc_member(tarfile_)


class CappedTail:
    """Keeps the last `cap` bytes written and counts the rest."""

    def __init__(self, cap: int = OUTPUT_CAP) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.dropped = 0

    def write(self, data: bytes) -> None:
        self.kept += data
        if len(self.kept) > self.cap:
            extra = len(self.kept) - self.cap
            del self.kept[:extra]
            self.dropped += extra

    def text(self) -> str:
        shown = self.kept.decode(errors="replace")
        if self.dropped:
            return f"[{self.dropped} earlier bytes dropped]\n{shown}"
        return shown

    def lines(self) -> list[str]:
        """What `text` holds, line by line, stripped, blank ones left out."""
        return [line.strip() for line in self.text().splitlines() if line.strip()]


def drain(receive: Callable[[int], bytes], sink: Callable[[bytes], None]) -> None:
    """Read until EOF, handing each chunk to `sink`."""
    while data := receive(_CHUNK):
        sink(data)


def dropped(_data: bytes) -> None:
    """A sink for `drain` that keeps nothing: a stream read out only so its writer ends."""


def drain_in_background(
    receive: Callable[[int], bytes], sink: Callable[[bytes], None]
) -> threading.Thread:
    """`drain` on a helper thread (join it after the other stream): both streams of a channel
    are read at once, so neither fills its window and stalls the remote command."""
    reader = threading.Thread(target=drain, args=(receive, sink), daemon=True)
    reader.start()
    return reader


@contextlib.contextmanager
def sftp_answers(doing: str) -> Iterator[None]:
    """What paramiko raises when a node's SFTP answers are not SFTP (a reply over its 16 MB
    packet limit is "Garbage packet received") or end mid-way: one line, not a bug (also a
    decorator)."""
    from paramiko.sftp import SFTPError

    try:
        yield
    except SFTPError as exc:
        raise OpsError(f"{doing}: the node's answer could not be read ({exc}): the rest "
                       "refused") from None
    except EOFError:
        raise OpsError(f"{doing}: the node's SFTP session ended mid-way; run again") from None
