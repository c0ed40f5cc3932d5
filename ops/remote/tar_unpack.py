"""The local side of `rsync-down`'s stream (ops.remote.tar_fetch): the names asked for go to
the node's tar as the walk finds them (its `pack`, the session's last request, reads them to
the end of its stdin), and what it sends back is unpacked here meanwhile, so the walk, the
node's tar, the wire and the unpacking overlap. Nothing asked for: no stream.

Nothing of the node's stream reaches the local GNU tar as the node wrote it: each header is
read here first (ops.remote.tar_headers: checksum checked, a long name bounded before it is
read), and only a member that is a regular file the walk asked for, sent once, goes on, under a
header written here (its name, its mode without special bits, its size and mtime) with exactly
its data; anything else (a link, a folder, a device, a hard link, a name never asked for or
sent twice) is left out by name and its data skipped. So the local tar unpacks only plain files
into a private folder (0700) made in the destination, `--no-same-owner`. Once that tar has
ended (nothing of it can change a file after), each file whose data came whole is moved into
its place through folder handles opened with O_NOFOLLOW (ops.remote.landing), from the private
folder and into the destination, after its own fstat says it is one plain file. The private
folder is then removed without following anything in it (landing.remove_tree). A stream that
cannot be read on, or a thread here that fails, ends the run in one line: the node's ssh and
the local tar are stopped, so nothing waits on a full pipe.

Where the local tar is not GNU's (a Mac's), Python's tarfile reads the stream (its name and pax
headers capped by untrusted.CappedHeaders) and writes each member that is a file asked for at
its own place (ops.remote.landing), naming what it refuses. Bytes are counted as they arrive,
files as each one's data is whole.
"""

from __future__ import annotations

import contextlib
import errno
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
from ops.remote.tar_headers import (
    BLOCK,
    KIND_WORDS,
    HeaderReader,
    Member,
    StreamRefused,
    padded,
    rewritten_header,
)
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
MAX_REFUSED = 10_000  # members left out, named, before the stream is refused whole
NAME_SHOWN = 200  # characters of a name left out that are shown
TRAILER_CAP = 1 << 20  # bytes read after the archive's end (GNU tar pads to 10 KiB)
NAMES_PER_FLUSH = 256  # names sent to the node's tar at once while the walk goes on


class Unpacker:
    """The files `add`ed ({name in the node's `folder`: path under `here`}) fetched and put
    in place under `here` by the end of the block; then `wanted` holds those that never
    arrived and `said` what the tar here said about them."""

    def __init__(self, session: Session, folder: str, here: Path, report: SyncReport,
                 progress: Transfers | None) -> None:
        self.session = session
        self.folder = folder
        self.here = here
        self.report = report
        self.progress = progress
        self.wanted: dict[str, str] = {}
        self.whole: list[str] = []  # names whose data reached the local tar whole, in order
        self.said: list[str] = []
        self.unsent = 0
        self.reader: threading.Thread | None = None
        self.failure: BaseException | None = None
        self.staging: str | None = None
        self.tar: subprocess.Popen[bytes] | None = None
        self.heard: threading.Thread | None = None
        self.errors = CappedTail(STDERR_CAP)

    def __enter__(self) -> Unpacker:
        return self

    def add(self, name: str, local: str) -> None:
        """Ask for `name`, to land at `local` (under `here`); the stream starts with the
        first."""
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
            status = self._finish_tar() if self.tar is not None else 0
            if self.failure is not None:  # said before the walk's NodeEnded it caused
                raise self.failure
            if kind is not None:
                return
            if status != 0:
                raise OpsError(f"the local tar could not unpack what {self.session.node.name} "
                               f"sent (exit {status}): {' / '.join(self.said[-3:])}")
            if self.tar is not None:
                self._place_all()
        finally:
            if self.staging is not None:
                landing.remove_tree(self.here, self.staging)

    def _start(self) -> None:
        self.session.accepted = {0, *TAR_PARTIAL}
        self.session.request("pack", self.folder.encode(errors="surrogateescape"))
        tar = gnu_tar()
        if tar is None:
            self.reader = _started(self._guarded, self._read_with_tarfile)
            return
        try:
            self.staging = os.path.basename(tempfile.mkdtemp(prefix=".ray-gcp-fetch-",
                                                             dir=self.here))
        except OSError as exc:
            raise OpsError(f"cannot write in {self.here}: {exc.strerror}") from None
        self.tar = subprocess.Popen(
            [tar, "-x", "-f", "-", "-C", str(self.here / self.staging), "--no-same-owner",
             "-p"],  # the modes written here: without special bits
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.heard = drain_in_background(self.tar.stderr.read1, self.errors.write)
        self.reader = _started(self._guarded, self._relay, self.tar.stdin)

    def _guarded(self, work: Callable[..., None], *args: object) -> None:
        """`work` on this thread; its failure ends the run: kept to be raised in the caller's
        thread, the node's ssh stopped (so the walk's next name fails at once and nothing
        waits on a pipe)."""
        try:
            work(*args)
        except BaseException as error:  # said in the caller's thread, after the join
            self.failure = error
            self.session.process.kill()
        finally:
            if self.tar is not None:
                with contextlib.suppress(BrokenPipeError):
                    self.tar.stdin.close()  # the local tar ends with what it has

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
        """ssh's stdout read header by header (ops.remote.tar_headers); each member that is
        a file asked for, sent once, goes into the local tar under a header written here with
        exactly its data (pipe to pipe in the kernel where it can: Linux's splice), counting
        the bytes; the others are left out by name and their data skipped. A stream that
        cannot be read on is a one-line OpsError. After the archive's end, what the node's tar
        pads it with is read out (no more than TRAILER_CAP)."""
        source = _Relay(self.session.stdout.fileno(), sink.fileno(), self.progress)
        reader = HeaderReader(source.read_exact)
        sent: set[str] = set()
        try:
            while (member := reader.next()) is not None:
                why = _refusal(member, self.wanted, sent)
                if why is not None:
                    self._refuse(member.name, why)
                    if member.name in self.wanted and member.name not in sent:
                        # said here, not again as never arrived (a file sent twice keeps
                        # its first, still to be placed)
                        del self.wanted[member.name]
                        sent.add(member.name)
                    source.skip(member.data_blocks)
                    continue
                sent.add(member.name)
                header = rewritten_header(member.name, safe_mode(member.mode), member.size,
                                          member.mtime)
                source.write(header)
                source.move(padded(member.size))
                self.whole.append(member.name)
                if self.progress is not None:
                    self.progress.add_file(member.name)
            source.write(bytes(2 * BLOCK))
            source.flush()
        except StreamRefused as refused:
            raise OpsError(f"the tar stream from {self.session.node.name} could not be read "
                           f"({refused}): the rest refused") from None
        except BrokenPipeError:  # the local tar ended early: its status and stderr say why
            pass
        if source.skip(TRAILER_CAP) >= TRAILER_CAP:
            raise OpsError(f"{self.session.node.name} sent more after its tar's end: refusing "
                           "the rest")

    def _refuse(self, name: str, why: str) -> None:
        """A member left out, named (its name cut to NAME_SHOWN); past MAX_REFUSED of them
        the stream is not read on (a node sending endless members not asked for)."""
        if len(self.report.refused) >= MAX_REFUSED:
            raise StreamRefused(f"over {MAX_REFUSED} members that could not be taken")
        shown = name if len(name) <= NAME_SHOWN else f"{name[:NAME_SHOWN]}..."
        self.report.refused.append(f"{shown!r}: {why}")

    def _finish_tar(self) -> int:
        """The local tar's end: its status; what it said kept in `said`."""
        assert self.tar is not None
        with contextlib.suppress(BrokenPipeError):
            self.tar.stdin.close()
        status = self.tar.wait()
        if self.heard is not None:
            self.heard.join()
        self.tar.stderr.close()
        self.said = self.errors.lines()
        return status

    def _place_all(self) -> None:
        """Each file whose data came whole moved from the private folder into its place, both
        reached through folder handles (landing.parent_of: no link followed on the way), if
        it is one plain file; its mode was written here, without special bits."""
        assert self.staging is not None
        with contextlib.ExitStack() as stack:
            staging = landing.open_folder(self.here, self.staging)
            stack.callback(os.close, staging)
            here = landing.open_folder(self.here, "")
            stack.callback(os.close, here)
            sources = stack.enter_context(contextlib.closing(landing.Folders(staging)))
            targets = stack.enter_context(contextlib.closing(landing.Folders(here)))
            for name in self.whole:
                local = self.wanted.pop(name, None)
                if local is None:
                    continue
                try:
                    _move(sources, name, targets, local)
                except (OSError, RefusedEntry) as exc:
                    self.report.refused.append(
                        f"{name!r}: {getattr(exc, 'strerror', None) or exc}")
                    continue
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
        except StreamRefused as refused:
            self.session.process.kill()  # what is left is not read out: it may not end
            self.failure = OpsError(f"the tar stream from {self.session.node.name} could not "
                                    f"be read ({refused}): the rest refused")
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
            with landing.landed_file(self.here, local, member.mode, member.mtime) as sink:
                data = archive.extractfile(member)
                while chunk := data.read(COPY_BUFFER):
                    sink.write(chunk)
                    if self.progress is not None:
                        self.progress.add_bytes(len(chunk))
        except RefusedEntry as exc:
            self._refuse(member.name, str(exc))
            self.wanted.pop(member.name, None)  # said once, here
            return
        del self.wanted[member.name]
        self.report.sent.append(member.name)
        if self.progress is not None:
            self.progress.add_file(member.name)


def _refusal(member: Member, wanted: dict[str, str], sent: set[str]) -> str | None:
    """Why `member` does not go to the local tar, or None when it is a file asked for and
    not sent before."""
    if member.name in sent:
        return "the node sent it twice (the first kept)"
    if member.name not in wanted:
        return "the node sent what was not asked for"
    if member.after_pax:
        return "the node described it with a pax header (only GNU's format is asked)"
    if not member.is_file:
        return f"the node sent it as {KIND_WORDS.get(member.kind, 'something other than a file')}"
    return None


def _move(sources: landing.Folders, name: str, targets: landing.Folders, local: str) -> None:
    """`name` in the private folder to `local` under the destination, each folder on both
    ways opened with O_NOFOLLOW (`sources`, `targets`); renamed, or copied as
    ops.remote.landing writes a file when `local` is on another file system (a mount inside
    the destination)."""
    source_dir, _, source_name = name.rpartition("/")
    target_dir, _, target_name = local.rpartition("/")
    source_folder, target_folder = sources(source_dir), targets(target_dir)
    descriptor = os.open(source_name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=source_folder)
    with os.fdopen(descriptor, "rb") as source:
        st = os.fstat(descriptor)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise RefusedEntry("the node sent it as something other than a file")
        try:
            os.rename(source_name, target_name, src_dir_fd=source_folder,
                      dst_dir_fd=target_folder)
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
        with landing.landed_file(target_folder, target_name, st.st_mode, st.st_mtime,
                                 st.st_atime) as sink:
            shutil.copyfileobj(source, sink, COPY_BUFFER)


class _Relay:
    """The node's stream (`source`) read in large pieces and what goes on written to the local
    tar (`target`) in large pieces: many small files cost a few system calls, not four each;
    a file's data past what was read ahead goes pipe to pipe in the kernel (Linux's splice)."""

    def __init__(self, source: int, target: int, progress: Transfers | None) -> None:
        self.source, self.target, self.progress = source, target, progress
        self.ahead = bytearray()  # read from the node, not yet taken
        self.out = bytearray()  # for the local tar, not yet written

    def read_exact(self, count: int) -> bytes:
        """`count` bytes of the stream, fewer only at its end."""
        while len(self.ahead) < count and (chunk := os.read(self.source, COPY_BUFFER)):
            self.ahead += chunk
        taken = bytes(self.ahead[:count])
        del self.ahead[:count]
        return taken

    def skip(self, count: int) -> int:
        """Up to `count` bytes of the stream dropped; how many there were."""
        skipped = min(count, len(self.ahead))
        del self.ahead[:skipped]
        while skipped < count and (chunk := os.read(self.source,
                                                    min(COPY_BUFFER, count - skipped))):
            skipped += len(chunk)
        return skipped

    def write(self, data: bytes) -> None:
        self.out += data
        if len(self.out) >= COPY_BUFFER:
            self.flush()

    def move(self, count: int) -> None:
        """Exactly `count` bytes of the stream to the local tar; a stream that ends first is a
        StreamRefused (the member is not whole)."""
        if self.progress is not None:
            self.progress.add_bytes(count)
        taken = min(count, len(self.ahead))
        self.write(self.ahead[:taken])
        del self.ahead[:taken]
        count -= taken
        if not count:
            return
        self.flush()
        move = getattr(os, "splice", _read_and_write)
        while count:
            moved = move(self.source, self.target, min(COPY_BUFFER, count))
            if not moved:
                raise StreamRefused("it ends inside a file")
            count -= moved

    def flush(self) -> None:
        view = memoryview(self.out)
        while view:
            view = view[os.write(self.target, view):]
        view.release()
        self.out.clear()


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
