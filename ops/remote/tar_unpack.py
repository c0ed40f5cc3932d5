"""The local side of `rsync-down`'s stream (ops.remote.tar_fetch): the names asked for go to
the node's tar as the walk finds them (its `pack`, the session's last request, reads them to
the end of its stdin), and what it sends back is unpacked here meanwhile, so the walk, the
node's tar, the wire and the unpacking overlap. Nothing asked for: no stream.

The local GNU tar unpacks the stream into a private folder (0700) made in the destination,
and each file asked for is renamed into its place if it is one plain file (not a link, a
device or a hard link), without special bits, with the node's mtime: as soon as tar names the
member after it (it is whole then), the rest when tar ends. GNU tar is trusted with
no more than that folder: it strips a leading `/`, skips a member whose name holds `..`,
makes a link leading out only at the end (after any member that would go through it), never
restores an owner (`--no-same-owner`); whatever it made there that is not a plain file asked
for (a link, a device, a hard link, a member never asked for) goes with the folder. It is not
given the names to pick: it searches its name list once for every member (5,000 names: 70 ms,
20,000: 1.2 s). Where the local tar is not GNU's (a Mac's), Python's tarfile reads the stream
and writes each member that is a file asked for at its own place (ops.remote.landing), naming
what it refuses. Bytes are counted as they arrive, files as the tar names them.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ops.errors import OpsError
from ops.remote import landing
from ops.remote.progress import Transfers
from ops.remote.sync_walk import SyncReport
from ops.remote.tar_session import STDERR_CAP, NodeEnded, Session
from ops.remote.tar_writer import COPY_BUFFER, gnu_tar
from ops.remote.untrusted import (
    CappedHeaders,
    CappedTail,
    RefusedEntry,
    drain,
    drain_in_background,
    dropped,
    safe_mode,
)

TAR_PARTIAL = {1, 2}  # the node's GNU tar: a file changed while read / some not read
SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
NAMES_PER_FLUSH = 256  # names sent to the node's tar at once while the walk goes on


class Unpacker:
    """The files `add`ed ({name in the node's `folder`: local path}) fetched and put in place
    under `here` by the end of the block; then `wanted` holds those that never arrived and
    `said` what the tar here said about them."""

    def __init__(self, session: Session, folder: str, here: Path, report: SyncReport,
                 progress: Transfers | None) -> None:
        self.session = session
        self.folder = folder
        self.here = here
        self.report = report
        self.progress = progress
        self.wanted: dict[str, str] = {}
        self.said: list[str] = []
        self.unsent = 0
        self.reader: threading.Thread | None = None
        self.failure: BaseException | None = None
        self.staging: tempfile.TemporaryDirectory[str] | None = None
        self.tar: subprocess.Popen[bytes] | None = None
        self.heard: list[threading.Thread] = []
        self.errors = CappedTail(STDERR_CAP)

    def __enter__(self) -> Unpacker:
        return self

    def add(self, name: str, local: str) -> None:
        """Ask for `name`, to land at `local`; the stream starts with the first."""
        if self.reader is None:
            self._start()
        self.wanted[name] = local
        self._send(name.encode(errors="surrogateescape") + b"\0")
        self.unsent += 1
        if self.unsent >= NAMES_PER_FLUSH:
            self._flush()

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if self.reader is None:
            return
        if kind is not None:  # the walk failed (or Ctrl-C): the stream is not wanted
            self.session.process.kill()
        with contextlib.suppress(NodeEnded, BrokenPipeError):  # the reader sees the end
            self._flush()
            self.session.stdin.close()  # the node's tar has every name: it ends its archive
        self.reader.join()
        try:
            if self.tar is not None:
                self.said = self._finish_tar()
            if kind is not None:
                return
            if self.failure is not None:
                raise self.failure
            for name in list(self.wanted) if self.tar is not None else ():
                self._place(name, finished=True)  # the last, and any put off
        finally:
            if self.staging is not None:
                self.staging.cleanup()

    def _start(self) -> None:
        self.session.accepted = {0, *TAR_PARTIAL}
        self.session.request("pack", self.folder.encode(errors="surrogateescape"))
        tar = gnu_tar()
        if tar is None:
            self.reader = _started(self._read_with_tarfile)
            return
        try:
            self.staging = tempfile.TemporaryDirectory(prefix=".ray-gcp-fetch-", dir=self.here)
        except OSError as exc:
            raise OpsError(f"cannot write in {self.here}: {exc.strerror}") from None
        self.tar = subprocess.Popen(
            [tar, "-x", "-f", "-", "-C", self.staging.name, "-p", "--no-same-owner", "-v"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.heard = [drain_in_background(self.tar.stderr.read1, self.errors.write),
                      _started(self._hear_names, self.tar.stdout)]
        self.reader = _started(self._relay, self.tar.stdin)

    def _send(self, data: bytes) -> None:
        try:
            self.session.stdin.write(data)
        except BrokenPipeError:
            raise NodeEnded from None

    def _flush(self) -> None:
        try:
            self.session.stdin.flush()
        except BrokenPipeError:
            raise NodeEnded from None
        self.unsent = 0

    def _relay(self, sink: IO[bytes]) -> None:
        """ssh's stdout into the local tar, counting the bytes, to its end: pipe to pipe in
        the kernel where it can (Linux's splice: no copy through Python), else read and
        written. If the local tar ends early (its status and stderr say why) the rest is read
        and dropped, so ssh never waits on a full pipe."""
        source, target = self.session.stdout.fileno(), sink.fileno()
        move = getattr(os, "splice", _read_and_write)
        try:
            while moved := move(source, target, COPY_BUFFER):
                if self.progress is not None:
                    self.progress.add_bytes(moved)
        except BrokenPipeError:
            drain(functools.partial(os.read, source), dropped)

    def _hear_names(self, stdout: IO[bytes]) -> None:
        """The local tar's -v lines: a name as its member is begun, so the one before is
        whole (data, mode, times) and is put in place meanwhile. Counted as files."""
        before = None
        for line in stdout:
            name = line.decode(errors="surrogateescape").rstrip("\n")
            if before in self.wanted:
                self._place(before, finished=False)
            before = name
            if self.progress is not None:
                self.progress.add_file(name)

    def _finish_tar(self) -> list[str]:
        """The local tar's end; what it said, blank lines left out."""
        assert self.tar is not None
        with contextlib.suppress(BrokenPipeError):
            self.tar.stdin.close()
        self.tar.wait()
        for thread in self.heard:
            thread.join()
        self.tar.stdout.close()
        self.tar.stderr.close()
        return self.errors.lines()

    def _place(self, name: str, finished: bool) -> None:
        """The staged `name` renamed to where it is wanted if it is one plain file, its
        mode without special bits; the place itself was judged by the walk (not a link, not
        a folder). Before the tar has `finished`, a file with no permission bits at all is
        left for the end: it may be tar's stand-in for a link it makes last."""
        assert self.staging is not None
        staged = os.path.join(self.staging.name, name)
        try:
            st = os.lstat(staged)
        except FileNotFoundError:
            return  # never arrived: said after, with the tar's word for it
        if not finished and not st.st_mode & 0o777:
            return
        local = self.wanted.pop(name)
        try:
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                raise RefusedEntry("the node sent it as something other than a file")
            if st.st_mode & SPECIAL_BITS:
                os.chmod(staged, safe_mode(st.st_mode))
            _move(staged, local, st)
        except (OSError, RefusedEntry) as exc:  # never raised here: this runs on tar's -v too
            self.report.refused.append(f"{name!r}: {getattr(exc, 'strerror', None) or exc}")
            return
        self.report.sent.append(name)

    def _read_with_tarfile(self) -> None:
        """The stream read by Python's tarfile, member by member, into the files wanted;
        each written or refused is taken out of `wanted`."""
        try:
            with tarfile.open(fileobj=self.session.stdout, mode="r|",
                              tarinfo=CappedHeaders) as archive:
                for member in archive:
                    self._write_member(archive, member)
        except tarfile.TarError as error:
            if self.report.sent or str(error) != "empty file":  # empty: none could be read
                self.failure = OpsError(f"the tar stream from {self.session.node.name} could "
                                        f"not be read ({error}); run again")
        except OSError as error:  # this disk: full, say
            self.failure = OpsError(f"writing what {self.session.node.name} sent failed: "
                                    f"{error.strerror or error}")
        except BaseException as error:  # said in the caller's thread, after the join
            self.failure = error
        finally:
            # tar's padding after its end, or what is left after a failure, read out: ssh
            # must not wait on a full pipe
            drain(self.session.stdout.read, dropped)

    def _write_member(self, archive: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        """One member written where it is wanted: only a file asked for and not written yet,
        at its own place."""
        try:
            if member.name not in self.wanted:
                raise RefusedEntry("the node sent what was not asked for (or sent it twice)")
            if not member.isreg():
                raise RefusedEntry("the node sent it as something other than a file")
            local = self.wanted[member.name]
            with landing.landed_file(local, member.mode, member.mtime) as sink:
                data = archive.extractfile(member)
                while chunk := data.read(COPY_BUFFER):
                    sink.write(chunk)
                    if self.progress is not None:
                        self.progress.add_bytes(len(chunk))
        except RefusedEntry as exc:
            self.report.refused.append(f"{member.name!r}: {exc}")
            self.wanted.pop(member.name, None)  # said once, here
            return
        del self.wanted[member.name]
        self.report.sent.append(member.name)
        if self.progress is not None:
            self.progress.add_file(member.name)


def _move(staged: str, local: str, st: os.stat_result) -> None:
    """`staged` to `local`: renamed, or copied as ops.remote.landing writes a file when
    `local` is on another file system (a mount inside the destination)."""
    try:
        os.rename(staged, local)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        with open(staged, "rb") as source, landing.landed_file(
                local, st.st_mode, st.st_mtime, st.st_atime) as sink:
            shutil.copyfileobj(source, sink, COPY_BUFFER)


def _read_and_write(source: int, target: int, count: int) -> int:
    """Up to `count` bytes from `source` written whole to `target`; 0 at the end."""
    data = memoryview(os.read(source, count))
    while data:
        data = data[os.write(target, data):]
    return len(data.obj)


def _started(target: Callable[..., None], *args: object) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread
