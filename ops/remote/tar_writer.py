"""The tar a sync streams to a node (ops.remote.tar_stream): the entries the walk chose, each
a folder or a regular file (a link followed) with its mode and mtime, written into a sink
(the ssh process's stdin) as they are read, counting bytes and files for the progress line.

Under a local folder, the system's GNU tar writes it (`--no-recursion --dereference`, the
names on its stdin): many small files at C's speed, where Python's tarfile spends tens of
microseconds on each header; a single file (which may take another name on the node), or a
machine whose tar is not GNU's, gets Python's tarfile. The node unpacks either as its
login's own (`--no-same-owner`), so the owners written here do not matter. What is neither a
file nor a folder (a fifo, a socket) GNU tar sends as tar does (a fifo as a fifo, a socket
not at all); Python's tarfile refuses it by name before writing anything.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tarfile
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO

from ops.errors import OpsError
from ops.remote.progress import Transfers

COPY_BUFFER = 1 << 20  # bytes per read of a local file (or of the system tar) into the sink


@dataclass
class Candidate:
    """One entry the walk keeps: its name in the archive (relative to the folder it is
    unpacked in), its local path, whether the walk listed it as a folder; what it is there
    (a link followed) is read once, when first needed: a first send under GNU tar never
    needs it."""

    name: str
    local: Path
    is_folder: bool
    _st: os.stat_result | None = None

    def st(self) -> os.stat_result:
        """The entry's stat; one that is neither a folder nor a regular file is refused by
        name (Python's tarfile would otherwise hang on a fifo, or write a short file)."""
        if self._st is None:
            try:
                st = self.local.stat()
            except OSError as exc:  # a link to nothing, or gone since the walk
                raise OpsError(f"{self.local} cannot be sent: {exc.strerror}") from None
            if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                raise OpsError(f"{self.local} is neither a file nor a folder: leave it out "
                               "with the cluster YAML's rsync_exclude")
            self._st = st
        return self._st


def write_tar(sink: IO[bytes], root: Path | None, entries: list[Candidate],
              progress: Transfers | None) -> None:
    """`entries` (names relative to the local folder `root`, or None for one file) as a
    tar into `sink`."""
    tar = gnu_tar() if root is not None else None
    if tar is not None and root is not None:
        _with_system_tar(tar, sink, root, entries, progress)
    else:
        _with_tarfile(sink, entries, progress)


@cache
def gnu_tar() -> str | None:
    """The system's tar when it is GNU's (whose options _with_system_tar uses), else None."""
    tar = shutil.which("tar")
    if tar is None:
        return None
    try:
        done = subprocess.run([tar, "--version"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tar if done.returncode == 0 and b"GNU tar" in done.stdout else None


def _with_system_tar(tar: str, sink: IO[bytes], root: Path, entries: list[Candidate],
                     progress: Transfers | None) -> None:
    """GNU tar reads `entries` under `root` and writes the archive here, relayed into
    `sink`; it names each entry on stderr as it goes (-v), which the progress hears."""
    process = subprocess.Popen(
        [tar, "-c", "-f", "-", "-C", str(root), "--no-recursion", "--dereference", "-v",
         "--null", "-T", "-"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    names = b"".join(entry.name.encode(errors="surrogateescape") + b"\0" for entry in entries)
    errors: list[str] = []
    threads = [threading.Thread(target=_feed, args=(process.stdin, names)),
               threading.Thread(target=_listen, args=(process.stderr, errors, progress))]
    for thread in threads:
        thread.start()
    try:
        for chunk in iter(lambda: os.read(process.stdout.fileno(), COPY_BUFFER), b""):
            sink.write(chunk)
            if progress is not None:
                progress.add_bytes(len(chunk))
    except BaseException:
        process.kill()
        raise
    finally:
        status = process.wait()
        for thread in threads:
            thread.join()
        process.stdout.close()
    if status != 0:
        raise OpsError(f"tar could not read everything to send under {root}: "
                       f"{' / '.join(errors[-3:]) or f'exit {status}'}; run again")


def _feed(stdin: IO[bytes], names: bytes) -> None:
    try:
        stdin.write(names)
        stdin.close()
    except BrokenPipeError:
        pass  # tar ended early; its status and stderr say why


def _listen(stderr: IO[bytes], errors: list[str], progress: Transfers | None) -> None:
    """tar's stderr: an entry's name as it is written (a folder's ends with /), or a line
    of its own starting `tar: `."""
    for raw in stderr:
        line = raw.decode(errors="replace").rstrip("\n")
        if line.startswith("tar: "):
            errors.append(line[len("tar: "):])
            del errors[:-10]
        elif progress is not None and line and not line.endswith("/"):
            progress.add_file(line)


def _with_tarfile(sink: IO[bytes], entries: list[Candidate],
                  progress: Transfers | None) -> None:
    for entry in entries:
        entry.st()  # refused before anything is written
    counted = _Counted(sink, progress)
    # "w", not the stream mode "w|": that one slices its 10 KB records out of a growing
    # buffer, copying each byte many times (4x slower for a large file)
    with tarfile.open(fileobj=counted, mode="w", format=tarfile.PAX_FORMAT,
                      copybufsize=COPY_BUFFER) as archive:
        for entry in entries:
            _add(archive, entry)
            if progress is not None and not entry.is_folder:
                progress.add_file(entry.name)


def _add(archive: tarfile.TarFile, entry: Candidate) -> None:
    """One entry with its mode and mtime (whole seconds, which keeps it out of a PAX header);
    a file that shrinks while it is read is an error, not a short file."""
    info = tarfile.TarInfo(entry.name)
    info.mode = stat.S_IMODE(entry.st().st_mode)
    info.mtime = int(entry.st().st_mtime)
    if entry.is_folder:
        info.type = tarfile.DIRTYPE
        archive.addfile(info)
        return
    info.size = entry.st().st_size
    try:
        with entry.local.open("rb") as source:
            archive.addfile(info, source)
    except OSError as exc:  # unreadable, or shorter than when it was listed
        raise OpsError(f"{entry.local} could not be sent ({exc}): run again") from None


class _Counted:
    """The sink, counting the bytes the tar writes into it (all tarfile asks of a file it
    writes an archive to: write, and tell)."""

    def __init__(self, sink: IO[bytes], progress: Transfers | None) -> None:
        self.sink = sink
        self.progress = progress
        self.written = 0

    def write(self, data: bytes) -> int:
        self.sink.write(data)
        self.written += len(data)
        if self.progress is not None:
            self.progress.add_bytes(len(data))
        return len(data)

    def tell(self) -> int:
        return self.written
